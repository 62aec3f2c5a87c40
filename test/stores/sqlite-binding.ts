import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type BetterSqlite3 from 'better-sqlite3'

// No vitest here: the claimer child processes (./dialect-claimer.ts) load it too.

/** better-sqlite3's module, and the native binding that loads on this Node, or why none does. */
export type BetterSqlite3Loader =
  | { load: (file: string) => BetterSqlite3.Database; reason?: undefined }
  | { load?: undefined; reason: string }

/**
 * better-sqlite3 builds a native binding for one Node ABI: the project's is built for the Node
 * that installed it (20). On another Node, .ci/run builds one per major into the folder it
 * keeps that Node in; the test takes whichever loads, or says why none does.
 */
export function betterSqlite3(): BetterSqlite3Loader {
  const require = createRequire(import.meta.url)
  const Database = require('better-sqlite3') as typeof BetterSqlite3
  const major = process.versions.node.split('.')[0]
  const cache = process.env.XDG_CACHE_HOME ?? join(process.env.HOME ?? tmpdir(), '.cache')
  const bindings = [
    undefined,
    join(
      cache,
      `idempotent-mutations/node-${major}/node_modules/better-sqlite3/build/Release/better_sqlite3.node`,
    ),
  ]
  const failures: string[] = []
  for (const nativeBinding of bindings) {
    try {
      new Database(':memory:', nativeBinding ? { nativeBinding } : {}).close()
      return {
        load: (file) => new Database(file, nativeBinding ? { nativeBinding } : {}),
      }
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
