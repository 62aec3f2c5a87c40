// What the pack check's steps share: its log and failure, how it runs commands, the package.
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
export const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))

export const log = (line) => console.log(`[pack:check] ${line}`)
export const fail = (message) => {
  console.error(`[pack:check] FAILED: ${message}`)
  process.exitCode = 1
  throw new Error(message)
}

// npm run sets npm_config_* for its own child; a nested npm must not inherit the outer
// project's settings (prefix, workspaces...), only where the cache and registry are.
export const npmEnv = Object.fromEntries(
  Object.entries(process.env).filter(
    ([name]) =>
      !name.startsWith('npm_') || ['npm_config_cache', 'npm_config_registry'].includes(name),
  ),
)
export const run = (command, args, cwd, env = npmEnv) =>
  execFileSync(command, args, { cwd, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })

/**
 * An app's lines (in an async module, with \`idempotency\` and \`KeyReusedError\` in scope): key
 * k-1 runs once, its retry replays, another payload under it is refused; else it throws, naming
 * \`label\` (a JavaScript expression).
 */
export const runsOnceLines = (label) => `let runs = 0
const request = { key: 'k-1', operation: 'pay', payload: { amount: 1 } }
const first = await idempotency.execute(request, async () => ++runs)
const retry = await idempotency.execute(request, async () => ++runs)
const reused = await idempotency
  .execute({ ...request, payload: { amount: 2 } }, async () => ++runs)
  .catch((error) => error)
if (first.value !== 1 || !retry.replayed || retry.value !== 1 || runs !== 1) {
  throw new Error(${label} + ': the key did not run once and replay')
}
if (!(reused instanceof KeyReusedError)) throw new Error(${label} + ': no KEY_REUSED for another payload')`
