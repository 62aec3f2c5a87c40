// Reads the vitest JSON report of each CI leg (.ci/test-results-<leg>.json) and fails unless, in
// each, the suites that need real services ran and passed. Prints a line per leg and, last, the
// totals over all of them.
//   node check-suites.mjs node20 node22 graphql17:postgres
// A leg needs [postgres], [redis] and [mysql] tests; `leg:postgres` needs [postgres] only.
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const folder = dirname(fileURLToPath(import.meta.url))
const totals = { passed: 0, failed: 0, skipped: 0 }
let failed = false
for (const argument of process.argv.slice(2)) {
  const [name, only] = argument.split(':')
  const required = only ? [`[${only}]`] : ['[postgres]', '[redis]', '[mysql]']
  const file = join(folder, `test-results-${name}.json`)
  if (!existsSync(file)) {
    console.error(`CI: ${name} wrote no test report (its run did not finish)`)
    failed = true
    continue
  }
  const report = JSON.parse(readFileSync(file, 'utf8'))
  const counts = Object.fromEntries(required.map((tag) => [tag, 0]))
  const leg = { passed: 0, failed: 0, skipped: 0 }
  for (const result of report.testResults) {
    // A file that failed to load has no assertions but a failed status.
    if (result.status === 'failed' && result.assertionResults.length === 0) leg.failed++
    for (const test of result.assertionResults) {
      if (test.status === 'passed') leg.passed++
      else if (test.status === 'failed') leg.failed++
      else leg.skipped++
      for (const tag of required) {
        if (test.fullName.includes(tag) && test.status === 'passed') counts[tag]++
      }
    }
  }
  for (const key of Object.keys(totals)) totals[key] += leg[key]
  const tagged = Object.entries(counts).map(([tag, passed]) => `${tag} ${passed}`)
  console.log(
    `${name}: ${leg.passed} passed, ${leg.failed} failed, ${leg.skipped} skipped (${tagged.join(', ')})`,
  )
  for (const [tag, passed] of Object.entries(counts)) {
    if (passed === 0) {
      console.error(`CI: no ${tag} test ran on ${name}; the real-service suites must run on CI`)
      failed = true
    }
  }
  if (leg.failed > 0) failed = true
}
console.log(`${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped`)
if (failed) process.exit(1)
