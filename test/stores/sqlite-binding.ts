import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type BetterSqlite3 from 'better-sqlite3'

// No vitest here: the claimer child processes (./dialect-claimer.ts) load it too.

/** better-sqlite3 as it loads on this Node (its version), or why it does not. */
export type BetterSqlite3Loader =
  | { load: (file: string) => BetterSqlite3.Database; version: string; reason?: undefined }
  | { load?: undefined; version?: undefined; reason: string }

/**
 * better-sqlite3 builds a native binding for one Node ABI, and its major 13 needs Node 22: the
 * project's own (12) is built for the Node that installed it (20). On Node 22 and 24, .ci/run
 * installs 13 into the folder it keeps that Node in; the tests take that one first, then the
 * project's, and say why when neither loads.
 */
export function betterSqlite3(): BetterSqlite3Loader {
  const require = createRequire(import.meta.url)
  const major = process.versions.node.split('.')[0]
  const cache = process.env.XDG_CACHE_HOME ?? join(process.env.HOME ?? tmpdir(), '.cache')
  const modules = [
    join(cache, `idempotent-mutations/node-${major}/node_modules/better-sqlite3`),
    'better-sqlite3',
  ]
  const failures: string[] = []
  for (const path of modules) {
    try {
      const Database = require(path) as typeof BetterSqlite3
      const { version } = require(`${path}/package.json`) as { version: string }
      new Database(':memory:').close()
      return { load: (file) => new Database(file), version }
    } catch (error) {
      failures.push((error as Error).message.split('\n')[0]!)
    }
  }
  return {
    reason: `better-sqlite3 does not load on Node ${process.version}: ${failures.join('; ')}`,
  }
}

/**
 * How long a writer waits for another one on a SQLite file. libSQL's client opens a pool of
 * connections, each with its `timeout` option (0 unless given): a PRAGMA reaches one of them.
 */
export const sqliteBusyTimeoutMs = 10_000

/** SQLite pragmas for several connections or processes on one file (docs/drizzle-dialects.md). */
export const sqlitePragmas = [
  'PRAGMA journal_mode = WAL',
  `PRAGMA busy_timeout = ${sqliteBusyTimeoutMs}`,
]
