import { sql } from 'drizzle-orm'
import {
  clientOf,
  parametersOf,
  type QueryLogger,
  type Row,
  type Statement,
  type StatementRunner,
} from '../runner'

/**
 * The SQLite runners: libSQL's client and better-sqlite3 directly (drizzle's logger still sees
 * each statement), any other driver (D1, Bun, Expo, sql.js) through drizzle's query path.
 */

/** What the store uses of a libSQL client (`createClient({ url })`). */
interface LibsqlClient {
  execute(statement: { sql: string; args: unknown[] }): Promise<{ rows: ArrayLike<unknown>[] }>
  batch: unknown
}

/** What the store uses of a better-sqlite3 `Database` and its statements. */
interface BetterSqlite3Database {
  prepare(text: string): BetterSqlite3Statement
  pragma: unknown
}
interface BetterSqlite3Statement {
  /** Whether it returns rows: every store statement but the DDL. */
  readonly reader: boolean
  raw(toggle: boolean): BetterSqlite3Statement
  all(...params: unknown[]): unknown[][]
  run(...params: unknown[]): unknown
}

/** The runner for the client behind `drizzle(client)`, past drizzle when it can. */
export function sqliteRunnerOf(db: object, logger: QueryLogger | undefined): StatementRunner {
  const client = clientOf(db) as Record<string, unknown> | undefined
  const log = (statement: Statement, values: object) => {
    const params = parametersOf(statement, values)
    logger?.logQuery(statement.text, params)
    return params
  }
  if (isLibsql(client)) {
    return {
      async run(statement, values) {
        const { rows } = await client.execute({ sql: statement.text, args: log(statement, values) })
        return rows.map((row) => Array.from(row))
      },
    }
  }
  if (isBetterSqlite3(client)) {
    // better-sqlite3 compiles a statement once; keep it for the next call.
    const prepared = new WeakMap<Statement, BetterSqlite3Statement>()
    return {
      async run(statement, values) {
        let compiled = prepared.get(statement)
        if (compiled === undefined) {
          compiled = client.prepare(statement.text)
          if (compiled.reader) compiled.raw(true)
          prepared.set(statement, compiled)
        }
        const params = log(statement, values)
        if (compiled.reader) return compiled.all(...params)
        compiled.run(...params)
        return []
      },
    }
  }
  return drizzleRunner(db)
}

function isLibsql(
  client: Record<string, unknown> | undefined,
): client is Record<string, unknown> & LibsqlClient {
  return (
    typeof client === 'object' &&
    typeof client.execute === 'function' &&
    typeof client.batch === 'function' &&
    typeof client.executeMultiple === 'function'
  )
}

function isBetterSqlite3(
  client: Record<string, unknown> | undefined,
): client is Record<string, unknown> & BetterSqlite3Database {
  return (
    typeof client === 'object' &&
    typeof client.prepare === 'function' &&
    typeof client.pragma === 'function'
  )
}

/** What the store uses of a drizzle SQLite session. */
interface SQLiteSessionLike {
  prepareQuery(
    query: { sql: string; params: unknown[] },
    fields: undefined,
    executeMethod: 'all',
    isResponseInArrayMode: boolean,
  ): { values(values: Record<string, unknown>): unknown[][] | Promise<ArrayLike<unknown>[]> }
}

/**
 * Drizzle's own query path: each statement one of drizzle's prepared queries, run for its rows
 * as arrays. No query metadata, so a drizzle query cache neither answers nor hears of it.
 */
function drizzleRunner(db: object): StatementRunner {
  const session = (db as { session: SQLiteSessionLike }).session
  const prepared = new WeakMap<Statement, ReturnType<SQLiteSessionLike['prepareQuery']>>()
  return {
    async run(statement, values): Promise<Row[]> {
      let query = prepared.get(statement)
      if (query === undefined) {
        const params = statement.params.map((field) => sql.placeholder(field))
        query = session.prepareQuery({ sql: statement.text, params }, undefined, 'all', true)
        prepared.set(statement, query)
      }
      // libSQL's rows are array-like objects, not arrays.
      const rows = await query.values(values as Record<string, unknown>)
      return rows.map((row) => Array.from(row))
    },
  }
}
