import { sql } from 'drizzle-orm'
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core'
import { getTableConfig } from 'drizzle-orm/pg-core'
import type { InspectableStore, StoreTransaction } from '../../../store'
import { claimRowOf, inspectionOf, recordOf } from '../rows'
import { clientOf, drizzleLoggerOf, type StatementRunner } from '../runner'
import { postgresErrorCode, type SqlDialect, sqlStore } from '../store'
import { type IdempotencyTable, idempotencyKeys } from '../table'
import { directRunnerFor, drizzleRunner } from './drivers'
import { pgliteClientOf, pgliteRunner } from './pglite'
import {
  alreadyCreated,
  createTableStatements,
  type PostgresStatements,
  postgresStatements,
} from './sql'
import { runDrizzleTransaction } from './transactional'

/**
 * Any drizzle PostgreSQL database: `drizzle(postgres.js)`, `drizzle(node-postgres)`,
 * `drizzle(PGlite)`, with or without a schema (the relational `query` API, whose type depends
 * on your schema, is the one part the store does not use). Pass the pool-level database, not a
 * transaction: a claim must commit on its own to be seen by concurrent retries.
 */
export type DrizzlePgDatabase = Omit<
  PgDatabase<PgQueryResultHKT, Record<string, unknown>>,
  'query' | '_'
>

export interface DrizzleStoreOptions {
  /**
   * The table records live in: `idempotencyKeys`, or your own from
   * `defineIdempotencyTable(name, schema)` (for example one in your drizzle-kit schema).
   * @default idempotencyKeys (table `idempotency_keys` in the default schema)
   */
  table?: IdempotencyTable | undefined
}

/**
 * The transaction type of a drizzle database: what `db.transaction(async (tx) => …)` hands its
 * callback, with your schema and driver in its type. Transactional mode gives it to handlers.
 */
export type DrizzleTransactionOf<TDatabase extends DrizzlePgDatabase> = Parameters<
  Parameters<TDatabase['transaction']>[0]
>[0]

/**
 * An {@link IdempotencyStore} over PostgreSQL through drizzle, plus table management.
 * `TTransaction` is your database's transaction type ({@link DrizzleTransactionOf}).
 */
export interface DrizzleStore<TTransaction = unknown> extends InspectableStore<TTransaction> {
  /** The table this store reads and writes. */
  readonly table: IdempotencyTable
  /**
   * Creates the table, its primary key and its `expires_at` index if they do not exist
   * (`CREATE … IF NOT EXISTS`, and `CREATE SCHEMA IF NOT EXISTS` for a table in a schema).
   * Safe to call from several processes at once. Skip it if drizzle-kit manages the table.
   */
  ensureTable(): Promise<void>
  /**
   * Runs `fn` in one transaction on the store's database (`db.transaction`), in which the
   * engine's transactional mode claims, lets the handler write, and records the outcome. See
   * `src/stores/drizzle/postgres/transactional.ts`.
   */
  transaction<T>(fn: (transaction: StoreTransaction<TTransaction>) => Promise<T>): Promise<T>
}

const expectedColumns = [
  'scope',
  'key',
  'fingerprint',
  'status',
  'response',
  'lease_token',
  'locked_until',
  'expires_at',
]

/**
 * The store on PostgreSQL (postgres.js, node-postgres, PGlite, or any other driver through
 * drizzle's query path). Every method is one statement, except a claim that must overwrite or
 * take a record over, which is two (see ../claim.ts and ./sql.ts).
 */
export function createPostgresStore<TDatabase extends DrizzlePgDatabase>(
  database: TDatabase,
  options: DrizzleStoreOptions = {},
): DrizzleStore<DrizzleTransactionOf<TDatabase>> {
  if (database === null || typeof database !== 'object' || typeof database.select !== 'function') {
    throw new TypeError(
      'idempotent-mutations: createDrizzleStore needs a drizzle PostgreSQL database, e.g. drizzle(pool)',
    )
  }
  // `withReplicas(primary, replicas)` sends selects (the claim is one, with an INSERT in it, and
  // so is the sweep) to a replica, which cannot write and may lag: the store uses the primary.
  const db = ((database as { $primary?: TDatabase }).$primary ?? database) as TDatabase
  const table = options.table ?? idempotencyKeys
  const columnNames = getTableConfig(table).columns.map((column) => column.name)
  if (expectedColumns.some((name) => !columnNames.includes(name))) {
    throw new TypeError(
      'idempotent-mutations: the `table` option must come from defineIdempotencyTable() (or be idempotencyKeys)',
    )
  }
  const statements = postgresStatements(table)
  const logger = drizzleLoggerOf(db)
  const pglite = pgliteClientOf(db)
  const pgliteStatements = pglite && pgliteRunner(pglite, logger)
  const runner: StatementRunner =
    pgliteStatements ?? directRunnerFor(clientOf(db), logger) ?? drizzleRunner(db)

  const dialect = postgresDialect(statements, runner, async () => {
    for (const statement of createTableStatements(table)) {
      try {
        await db.execute(sql.raw(statement))
      } catch (error) {
        // Two processes creating the same table or schema at once: one of them loses the
        // race on the catalog, and the object exists either way.
        if (!alreadyCreated.includes(postgresErrorCode(error) ?? '')) throw error
      }
    }
  })
  return {
    table,
    ...sqlStore(dialect),
    transaction: (fn) => runDrizzleTransaction(db, statements, pgliteStatements, fn),
  }
}

/** The store's calls as statements of `runner`. */
function postgresDialect(
  statements: PostgresStatements,
  runner: StatementRunner,
  ensureTable: () => Promise<void>,
): SqlDialect {
  const first = async (rows: PromiseLike<readonly (readonly unknown[])[]>) => (await rows)[0]
  return {
    claimPhases: (input) => ({
      insertOrRead: async () => claimRowOf(await first(runner.run(statements.insertOrRead, input))),
      underLock: async () => claimRowOf(await first(runner.run(statements.underLock, input))),
    }),
    complete: async (input) => (await runner.run(statements.complete, input)).length > 0,
    release: async (input) => (await runner.run(statements.release, input)).length > 0,
    get: async (scope, key) => recordOf(await first(runner.run(statements.get, { scope, key }))),
    inspect: async (scope, key) =>
      inspectionOf(scope, key, await first(runner.run(statements.inspect, { scope, key }))),
    deletePinned: async (record) => (await runner.run(statements.deletePinned, record)).length > 0,
    sweepBatch: async (batchSize) =>
      Number((await first(runner.run(statements.sweep, { batchSize })))?.[0] ?? 0),
    ensureTable,
  }
}
