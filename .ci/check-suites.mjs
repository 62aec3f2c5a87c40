// Reads vitest JSON reports (one per CI leg) and fails unless, in each, the suites that need real
// services ran and passed.
//   node check-suites.mjs A.json B.json      each leg ran [postgres] and [redis] tests, none failed
//   node check-suites.mjs --only postgres A  the same for [postgres] alone
//   node check-suites.mjs --totals A B ...   one line of totals over all the legs
import { readFileSync } from 'node:fs'
import { basename } from 'node:path'

const args = process.argv.slice(2)
const totalsOnly = args[0] === '--totals'
const only = args[0] === '--only' ? args[1] : undefined
const files = args.slice(totalsOnly ? 1 : only ? 2 : 0)
const required = only ? [`[${only}]`] : ['[postgres]', '[redis]']

const totals = { passed: 0, failed: 0, skipped: 0 }
let failed = false
for (const file of files) {
  const report = JSON.parse(readFileSync(file, 'utf8'))
  const counts = Object.fromEntries(required.map((tag) => [tag, 0]))
  const leg = { passed: 0, failed: 0, skipped: 0 }
  for (const result of report.testResults) {
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
  if (totalsOnly) continue
  const name = basename(file, '.json').replace(/^test-results-/, '')
  for (const [tag, passed] of Object.entries(counts)) {
    console.log(`${name}: suites tagged ${tag}: ${passed} tests passed`)
    if (passed === 0) {
      console.error(`CI: no ${tag} test ran on ${name}; the real-service suites must run on CI`)
      failed = true
    }
  }
  if (leg.failed > 0) failed = true
}
if (totalsOnly)
  console.log(`${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped`)
if (failed || totals.failed > 0) process.exit(1)
