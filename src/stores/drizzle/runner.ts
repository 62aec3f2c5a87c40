/**
 * The one seam between the store's SQL and a database driver. Every statement the store sends
 * is a {@link Statement} (text, the input fields its parameters take, a name), and every driver
 * runs it the same way: `run(statement, values)` resolves with the rows as arrays, in the order
 * the statement selects its columns. Each dialect's SQL module decodes those arrays; the drivers
 * know nothing of what the statements mean.
 *
 * Runners: postgres.js, node-postgres and drizzle's own query path for any other driver
 * (./postgres/drivers.ts), PGlite (./postgres/pglite.ts), mysql2 (./mysql/driver.ts), libSQL,
 * better-sqlite3 and drizzle's path for other SQLite drivers (./sqlite/drivers.ts).
 */

/** A statement of the store, built once per store (per table) and run many times. */
export interface Statement {
  /**
   * Its name among the store's statements, unique per table: node-postgres prepares it under
   * this name, PGlite names its function after it.
   */
  readonly name: string
  /** The SQL, with the dialect's placeholders (`$1` on PostgreSQL, `?` elsewhere). */
  readonly text: string
  /** The input field each placeholder takes, in placeholder order. */
  readonly params: readonly string[]
  /**
   * PGlite only: the result columns with their types (`state integer, …`), for the statements
   * worth running as a session function (see ./postgres/pglite.ts). Other drivers ignore it.
   */
  readonly columns?: string | undefined
}

/** A row as the drivers hand it back: the selected columns in order. */
export type Row = readonly unknown[]

/** A store call's input (or any record of values), read by the statement's `params`. */
export type Values = object

export interface StatementRunner {
  /**
   * Runs `statement` with the fields of `values` its `params` name, and resolves with its rows.
   * A MySQL statement that returns no result set (UPDATE, DELETE) resolves with one row holding
   * the number of rows it matched.
   */
  run(statement: Statement, values: Values): PromiseLike<Row[]>
  /**
   * True when a statement is handed to the connection once its answer is asked for (`then`),
   * and the connection sends statements in the order they were handed over, without waiting
   * for the answers to those before (postgres.js).
   */
  readonly pipelines?: boolean
}

/** The parameters of `statement` taken from `values`, in placeholder order. */
export function parametersOf(statement: Statement, values: Values): unknown[] {
  const fields = values as Record<string, unknown>
  return statement.params.map((field) => fields[field])
}

/**
 * Builds a statement's text and parameter list: `build` calls `p(field)` for each value it
 * needs and gets that dialect's placeholder. `numbered` placeholders (`$n`, PostgreSQL) are
 * reused when a field comes up again; positional ones (`?`) are repeated.
 */
export function buildStatement(
  name: string,
  numbered: boolean,
  build: (p: (field: string) => string) => string,
  columns?: string,
): Statement {
  const params: string[] = []
  const p = (field: string): string => {
    if (!numbered) {
      params.push(field)
      return '?'
    }
    const at = params.indexOf(field)
    return `$${at >= 0 ? at + 1 : params.push(field)}`
  }
  const text = build(p)
  return columns === undefined ? { name, text, params } : { name, text, params, columns }
}

/** What the store uses of drizzle's logger. */
export interface QueryLogger {
  logQuery(query: string, params: unknown[]): void
}

/**
 * The logger given to `drizzle(client, { logger })`, so statements the store sends past drizzle
 * are logged (and counted) as drizzle would log them. Undefined if drizzle keeps it elsewhere.
 */
export function drizzleLoggerOf(db: object): QueryLogger | undefined {
  const logger = (db as { session?: { logger?: Partial<QueryLogger> } }).session?.logger
  return typeof logger?.logQuery === 'function' ? (logger as QueryLogger) : undefined
}

/** The driver's client behind a drizzle database or transaction (`drizzle(client)`). */
export function clientOf(db: object): unknown {
  return (db as { $client?: unknown }).$client
}

/** The driver's connection of a drizzle transaction (its session's client). */
export function sessionClientOf(tx: object): unknown {
  return (tx as { session?: { client?: unknown } }).session?.client
}
