// Reads vitest's JSON report and fails unless the suites that need real services ran and passed.
import { readFileSync } from 'node:fs'

const report = JSON.parse(readFileSync(process.argv[2], 'utf8'))
const required = ['[postgres]', '[redis]']
const counts = Object.fromEntries(required.map((tag) => [tag, 0]))
const totals = { passed: 0, failed: 0, skipped: 0 }
for (const file of report.testResults) {
  for (const test of file.assertionResults) {
    if (test.status === 'passed') totals.passed++
    else if (test.status === 'failed') totals.failed++
    else totals.skipped++
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
console.log(`${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped`)
if (totals.failed > 0) process.exit(1)
