// Reads vitest's JSON report and fails unless the suites that need real services ran and passed.
import { readFileSync } from 'node:fs'

const report = JSON.parse(readFileSync(process.argv[2], 'utf8'))
const required = ['[postgres]', '[redis]']
const counts = Object.fromEntries(required.map((tag) => [tag, 0]))
for (const file of report.testResults) {
  for (const test of file.assertionResults) {
    for (const tag of required) {
      if (test.fullName.includes(tag) && test.status === 'passed') counts[tag]++
    }
  }
}
for (const [tag, passed] of Object.entries(counts)) {
  console.log(`suites tagged ${tag}: ${passed} tests passed`)
  if (passed === 0) {
    console.error(`CI: no ${tag} test ran; the real-service suites must run on CI`)
    process.exit(1)
  }
}
