import type { Placeholder } from 'drizzle-orm'
import type { QueryLogger } from './pglite'

/**
 * On postgres.js the claim and the completion, one each per first execution, go to the client
 * directly instead of through drizzle's prepared query: drizzle's generic path (placeholder
 * filling, tracing spans, its cache check, mapping each row field by field) cost about as much
 * client CPU as the statements' own encoding and parsing, on every keyed call. The statements
 * are drizzle's, unchanged (`toSQL()` of the same queries), sent as the same named prepared
 * statements, and drizzle's logger still sees each one.
 */

/** What the store uses of a postgres.js client (`postgres(url)`). */
export interface PostgresJsClient {
  unsafe(
    text: string,
    params: unknown[],
    options: { prepare: boolean },
  ): PromiseLike<unknown> & { values(): PromiseLike<unknown[][]> }
}

/** The postgres.js client behind `drizzle(client)`, or undefined for any other driver. */
export function postgresJsClientOf(db: object): PostgresJsClient | undefined {
  // A postgres.js client is a function (the tagged template) with methods.
  const client = (db as { $client?: unknown }).$client as
    | (((...args: never[]) => unknown) & {
        unsafe?: unknown
        begin?: unknown
        options?: { parsers?: unknown }
      })
    | undefined
  if (
    typeof client === 'function' &&
    typeof client.unsafe === 'function' &&
    typeof client.begin === 'function' &&
    typeof client.options?.parsers === 'object'
  ) {
    return client as unknown as PostgresJsClient
  }
  return undefined
}

export interface DirectStatement {
  /** Runs the statement with `values` (by placeholder name); resolves with the rows as arrays. */
  run(values: Record<string, unknown>): Promise<unknown[][]>
}

/** A statement of the store sent through `client.unsafe`, a named prepared statement. */
export function postgresJsStatement(
  client: PostgresJsClient,
  logger: QueryLogger | undefined,
  statement: { sql: string; params: unknown[] },
): DirectStatement {
  const names = statement.params.map((param) => {
    const name = (param as Placeholder).name
    if (typeof name !== 'string') {
      throw new Error(
        'idempotent-mutations: a store statement has a parameter that is not a placeholder',
      )
    }
    return name
  })
  return {
    async run(values) {
      const params = names.map((name) => values[name])
      logger?.logQuery(statement.sql, params)
      return (await client.unsafe(statement.sql, params, { prepare: true }).values()) as unknown[][]
    },
  }
}
