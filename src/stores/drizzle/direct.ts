import type { Placeholder } from 'drizzle-orm'
import type { QueryLogger } from './pglite'

/**
 * On postgres.js and node-postgres the claim's statements, the completion and the release (the
 * statements of every first execution, and transactional mode's, see ./transactional.ts) go to the client
 * directly instead of through drizzle's prepared query: drizzle's generic path
 * (placeholder filling, tracing spans, its cache check, mapping each row field by field) cost
 * about as much client CPU as the statements' own encoding and parsing, on every keyed call.
 * The statements are drizzle's, unchanged (`toSQL()` of the same queries), sent as the same
 * prepared statements (node-postgres: under the same names), and drizzle's logger still sees
 * each one.
 */

export interface DirectStatement {
  /** Runs the statement with `values` (by placeholder name); resolves with the rows as arrays. */
  run(values: Record<string, unknown>): PromiseLike<unknown[][]>
}

/** Makes a {@link DirectStatement} named `name` from drizzle's `toSQL()` of a query. */
export type DirectStatements = (
  name: string,
  statement: { sql: string; params: unknown[] },
) => DirectStatement

/** The placeholder name of each `$n` of drizzle's `toSQL()` of a store statement, in order. */
export function placeholderNames(statement: { params: unknown[] }): string[] {
  return statement.params.map((param) => {
    const name = (param as Placeholder).name
    if (typeof name !== 'string') {
      throw new Error(
        'idempotent-mutations: a store statement has a parameter that is not a placeholder',
      )
    }
    return name
  })
}

// Transactional mode makes a direct statement per transaction from the same few statements:
// their placeholder names are read once.
const placeholderNamesOf = new WeakMap<object, string[]>()
function namesOf(statement: { params: unknown[] }): string[] {
  let names = placeholderNamesOf.get(statement)
  if (names === undefined) {
    names = placeholderNames(statement)
    placeholderNamesOf.set(statement, names)
  }
  return names
}

/** What the store uses of a postgres.js client (`postgres(url)`). */
interface PostgresJsClient {
  unsafe(
    text: string,
    params: unknown[],
    options: { prepare: boolean },
  ): { values(): PromiseLike<unknown[][]> }
}

/** What the store uses of a node-postgres `Pool`, `Client` or pool client. */
interface NodePostgresClient {
  query(config: {
    name: string
    text: string
    values: unknown[]
    rowMode: 'array'
  }): Promise<{ rows: unknown[][] }>
}

/**
 * Direct statements for the client behind `drizzle(client)` when it is postgres.js or
 * node-postgres, else undefined (the store then goes through drizzle).
 */
export function directStatementsOf(
  db: object,
  logger: QueryLogger | undefined,
): DirectStatements | undefined {
  return directStatementsFor((db as { $client?: unknown }).$client, logger)
}

/**
 * Direct statements for `client` itself (a pool, or the connection of one transaction) when it
 * is postgres.js or node-postgres, else undefined.
 */
export function directStatementsFor(
  client: unknown,
  logger: QueryLogger | undefined,
): DirectStatements | undefined {
  let send: ((name: string, sql: string, params: unknown[]) => PromiseLike<unknown[][]>) | undefined
  if (isPostgresJs(client)) {
    // The query itself (a promise postgres.js runs when awaited), with no async wrapper around it.
    send = (_, sql, params) => client.unsafe(sql, params, { prepare: true }).values()
  } else if (isNodePostgres(client)) {
    send = async (name, sql, params) =>
      (await client.query({ name, text: sql, values: params, rowMode: 'array' })).rows
  }
  if (!send) return undefined
  const run = send
  return (name, statement) => {
    const names = namesOf(statement)
    return {
      run(values) {
        const params = names.map((placeholder) => values[placeholder])
        logger?.logQuery(statement.sql, params)
        return run(name, statement.sql, params)
      },
    }
  }
}

// postgres.js: the client is a function (the tagged template) with methods and its options; the
// `sql` of one of its transactions has neither `begin` nor `options`, but `savepoint` and `typed`.
function isPostgresJs(client: unknown): client is PostgresJsClient {
  const candidate = client as
    | (((...args: never[]) => unknown) & {
        unsafe?: unknown | undefined
        begin?: unknown | undefined
        options?: { parsers?: unknown } | undefined
        savepoint?: unknown | undefined
        typed?: unknown | undefined
      })
    | undefined
  return (
    typeof candidate === 'function' &&
    typeof candidate.unsafe === 'function' &&
    ((typeof candidate.begin === 'function' && typeof candidate.options?.parsers === 'object') ||
      (typeof candidate.savepoint === 'function' && typeof candidate.typed === 'function'))
  )
}

// node-postgres (and drivers with its API): an object with query, connect and end; PGlite, which
// also has query, is told apart by exec and handled on its own (./pglite.ts).
function isNodePostgres(client: unknown): client is NodePostgresClient {
  const candidate = client as Record<string, unknown> | null | undefined
  return (
    typeof candidate === 'object' &&
    candidate !== null &&
    typeof candidate.query === 'function' &&
    typeof candidate.connect === 'function' &&
    typeof candidate.end === 'function' &&
    typeof candidate.exec !== 'function'
  )
}
