import type {
  MySqlDatabase,
  MySqlQueryResultHKT,
  PreparedQueryHKTBase,
} from 'drizzle-orm/mysql-core'
import { getTableConfig } from 'drizzle-orm/mysql-core'
import type { ClaimInput, InspectableStore } from '../../../store'
import { type ClaimRow, claimRowOfRecord, inspectionOf, recordOf } from '../rows'
import { drizzleLoggerOf, type Statement, type StatementRunner } from '../runner'
import { driverErrorCode, type SqlDialect, sqlStore } from '../store'
import { refuseTransactions } from '../unsupported'
import { mysql2RunnerOf } from './driver'
import {
  createMySqlTableStatements,
  type MySqlStatements,
  mysqlAlreadyCreated,
  mysqlStatements,
} from './sql'
import { type MySqlIdempotencyTable, mysqlIdempotencyKeys, mysqlScopeLength } from './table'

/** Any drizzle MySQL database on mysql2 (`drizzle-orm/mysql2`), MySQL 8+ or MariaDB 10.5+. */
export type DrizzleMySqlDatabase = Omit<
  MySqlDatabase<MySqlQueryResultHKT, PreparedQueryHKTBase, Record<string, unknown>>,
  'query' | '_'
>

export interface DrizzleMySqlStoreOptions {
  /**
   * The table records live in: `mysqlIdempotencyKeys`, or your own from
   * `defineMySqlIdempotencyTable(name)`.
   * @default mysqlIdempotencyKeys (table `idempotency_keys`)
   */
  table?: MySqlIdempotencyTable | undefined
}

/** The Drizzle store on MySQL or MariaDB. Transactional mode is PostgreSQL's only. */
export interface DrizzleMySqlStore extends InspectableStore {
  /** The table this store reads and writes. */
  readonly table: MySqlIdempotencyTable
  /**
   * Creates the table and its `expires_at` index if they do not exist. Safe to call from
   * several processes at once. Skip it if drizzle-kit manages the table.
   */
  ensureTable(): Promise<void>
  /** Reading it throws `TransactionalModeUnsupportedError` (code `TRANSACTIONAL_UNSUPPORTED`). */
  readonly transaction?: never
}

/**
 * The store on MySQL or MariaDB through mysql2. `server` says which one it is; left out, the
 * store asks the server (`select version()`) once, before its first claim: MariaDB claims in
 * one statement (INSERT … RETURNING), MySQL in two.
 */
export function createMySqlStore(
  db: DrizzleMySqlDatabase,
  options: DrizzleMySqlStoreOptions = {},
  server?: 'mysql' | 'mariadb',
): DrizzleMySqlStore {
  const table = options.table ?? mysqlIdempotencyKeys
  if (getTableConfig(table).columns.every((column) => column.name !== 'lease_token')) {
    throw new TypeError(
      'idempotent-mutations: the `table` option must come from defineMySqlIdempotencyTable() (or be mysqlIdempotencyKeys)',
    )
  }
  const runner = mysql2RunnerOf(db, drizzleLoggerOf(db))
  if (runner === undefined) {
    throw new TypeError(
      'idempotent-mutations: the Drizzle store on MySQL needs drizzle-orm/mysql2 (another MySQL driver cannot report the rows an UPDATE matched)',
    )
  }
  let statements: Promise<MySqlStatements> | undefined
  const statementsFor = () => {
    statements ??= (
      server ? Promise.resolve(server) : serverOf(runner, mysqlStatements(table, false))
    ).then((kind) => mysqlStatements(table, kind === 'mariadb'))
    // A server that could not be asked is asked again by the next call.
    statements.catch(() => {
      statements = undefined
    })
    return statements
  }
  const dialect = mysqlDialect(statementsFor, runner, async () => {
    for (const text of createMySqlTableStatements(table)) {
      try {
        await runner.run({ name: 'ensure_table', text, params: [] }, {})
      } catch (error) {
        // Another process created it first: the table or index exists either way.
        if (!mysqlAlreadyCreated.includes(driverErrorCode(error, /^ER_/) ?? '')) throw error
      }
    }
  })
  return refuseTransactions({ table, ...sqlStore(dialect) }, 'mysql')
}

async function serverOf(
  runner: StatementRunner,
  statements: MySqlStatements,
): Promise<'mysql' | 'mariadb'> {
  const [row] = await runner.run(statements.version, {})
  return /mariadb/i.test(String(row?.[0])) ? 'mariadb' : 'mysql'
}

/** The store's calls as MySQL statements (see ./sql.ts for the claim's two phases). */
function mysqlDialect(
  statementsFor: () => Promise<MySqlStatements>,
  runner: StatementRunner,
  ensureTable: () => Promise<void>,
): SqlDialect {
  // An UPDATE's or DELETE's one row: how many rows it matched.
  const matched = async (pick: (statements: MySqlStatements) => Statement, values: object) => {
    const [row] = await runner.run(pick(await statementsFor()), values)
    return Number(row?.[0]) > 0
  }
  const read = async (statements: MySqlStatements, input: ClaimInput, won: 1 | 2 = 1) =>
    claimRowOfRecord((await runner.run(statements.read, input))[0], input, won)

  return {
    claimPhases: (input) => ({
      async insertOrRead() {
        if (input.scope.length > mysqlScopeLength) throw new ScopeTooLongError(input.scope)
        const statements = await statementsFor()
        const [row] = await runner.run(statements.claim, input)
        return statements.returning ? claimRowOfRecord(row, input) : read(statements, input)
      },
      async underLock(standing: ClaimRow) {
        const statements = await statementsFor()
        const expired = standing.expiresAt <= standing.now ? 1 : 0
        const values = { ...input, standingToken: standing.leaseToken, expired }
        const [row] = await runner.run(statements.takeOver, values)
        if (Number(row?.[0]) === 0) return undefined
        return read(statements, input, expired ? 1 : 2)
      },
    }),
    complete: (input) => matched((statements) => statements.complete, input),
    release: (input) => matched((statements) => statements.release, input),
    get: async (scope, key) => {
      const statements = await statementsFor()
      return recordOf((await runner.run(statements.get, { scope, key }))[0])
    },
    inspect: async (scope, key) => {
      const statements = await statementsFor()
      return inspectionOf(scope, key, (await runner.run(statements.inspect, { scope, key }))[0])
    },
    deletePinned: (record) => matched((statements) => statements.deletePinned, record),
    sweepBatch: async (batchSize) => {
      const statements = await statementsFor()
      return Number((await runner.run(statements.sweep, { batchSize }))[0]?.[0] ?? 0)
    },
    ensureTable,
  }
}

/**
 * A scope longer than the column: MySQL would refuse it in strict mode and, outside it, cut it
 * short, which could make two scopes one. The claim fails instead (503 upstream).
 */
class ScopeTooLongError extends Error {
  override name = 'ScopeTooLongError'
  constructor(scope: string) {
    super(
      `idempotent-mutations: the scope of this operation is ${scope.length} characters; the MySQL table holds ${mysqlScopeLength}`,
    )
  }
}
