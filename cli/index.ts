#!/usr/bin/env node
// `npx idempotent-mutations inspect|release|sweep`: an operator's view of the records. See
// `idempotent-mutations --help` and docs/operating.md.
import { runCli } from './run'

process.exitCode = await runCli(process.argv.slice(2), process.env, {
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(`${text}\n`),
})
