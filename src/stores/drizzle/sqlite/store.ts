import { type BaseSQLiteDatabase, getTableConfig } from 'drizzle-orm/sqlite-core'
import type { InspectableStore } from '../../../store'
import { type ClaimRow, claimRowOfRecord, inspectionOf, recordOf } from '../rows'
import { drizzleLoggerOf, type StatementRunner } from '../runner'
import { type SqlDialect, sqlStore } from '../store'
import { refuseTransactions } from '../unsupported'
import { sqliteRunnerOf } from './drivers'
import { createSQLiteTableStatements, type SQLiteStatements, sqliteStatements } from './sql'
import { type SQLiteIdempotencyTable, sqliteIdempotencyKeys } from './table'

/**
 * Any drizzle SQLite database: `drizzle-orm/libsql` (a local file, or Turso), `better-sqlite3`,
 * or another SQLite driver (D1, Bun, Expo) through drizzle's query path.
 */
export type DrizzleSQLiteDatabase = Omit<
  BaseSQLiteDatabase<'sync' | 'async', unknown, Record<string, unknown>>,
  'query' | '_'
>

export interface DrizzleSQLiteStoreOptions {
  /**
   * The table records live in: `sqliteIdempotencyKeys`, or your own from
   * `defineSQLiteIdempotencyTable(name)`.
   * @default sqliteIdempotencyKeys (table `idempotency_keys`)
   */
  table?: SQLiteIdempotencyTable | undefined
}

/** The Drizzle store on SQLite. Transactional mode is PostgreSQL's only. */
export interface DrizzleSQLiteStore extends InspectableStore {
  /** The table this store reads and writes. */
  readonly table: SQLiteIdempotencyTable
  /**
   * Creates the table and its `expires_at` index if they do not exist. Safe to call from
   * several processes at once. Skip it if drizzle-kit manages the table.
   */
  ensureTable(): Promise<void>
  /** Reading it throws `TransactionalModeUnsupportedError` (code `TRANSACTIONAL_UNSUPPORTED`). */
  readonly transaction?: never
}

/**
 * The store on SQLite. Several processes on one file need WAL mode and a `busy_timeout` (see
 * docs/drizzle-dialects.md): SQLite has one writer at a time, and a writer that finds the
 * database locked waits up to `busy_timeout`, then fails (the claim answers 503).
 */
export function createSQLiteStore(
  db: DrizzleSQLiteDatabase,
  options: DrizzleSQLiteStoreOptions = {},
): DrizzleSQLiteStore {
  const table = options.table ?? sqliteIdempotencyKeys
  if (getTableConfig(table).columns.every((column) => column.name !== 'lease_token')) {
    throw new TypeError(
      'idempotent-mutations: the `table` option must come from defineSQLiteIdempotencyTable() (or be sqliteIdempotencyKeys)',
    )
  }
  const runner = sqliteRunnerOf(db, drizzleLoggerOf(db))
  const dialect = sqliteDialect(sqliteStatements(table), runner, async () => {
    // IF NOT EXISTS makes each statement a no-op for a second process.
    for (const text of createSQLiteTableStatements(table)) {
      await runner.run({ name: 'ensure_table', text, params: [] }, {})
    }
  })
  return refuseTransactions({ table, ...sqlStore(dialect) }, 'sqlite')
}

/** The store's calls as SQLite statements (see ./sql.ts for the claim's two phases). */
function sqliteDialect(
  statements: SQLiteStatements,
  runner: StatementRunner,
  ensureTable: () => Promise<void>,
): SqlDialect {
  return {
    claimPhases: (input) => ({
      async insertOrRead() {
        const [claimed] = await runner.run(statements.claim, input)
        if (claimed !== undefined) return claimRowOfRecord(claimed, input)
        return claimRowOfRecord((await runner.run(statements.read, input))[0], input)
      },
      async underLock(standing: ClaimRow) {
        const expired = standing.expiresAt <= standing.now ? 1 : 0
        const values = { ...input, standingToken: standing.leaseToken, expired }
        const [row] = await runner.run(statements.takeOver, values)
        return claimRowOfRecord(row, input, expired ? 1 : 2)
      },
    }),
    complete: async (input) => (await runner.run(statements.complete, input)).length > 0,
    release: async (input) => (await runner.run(statements.release, input)).length > 0,
    get: async (scope, key) => recordOf((await runner.run(statements.get, { scope, key }))[0]),
    inspect: async (scope, key) =>
      inspectionOf(scope, key, (await runner.run(statements.inspect, { scope, key }))[0]),
    deletePinned: async (record) => (await runner.run(statements.deletePinned, record)).length > 0,
    sweepBatch: async (batchSize) => (await runner.run(statements.sweep, { batchSize })).length,
    ensureTable,
  }
}
