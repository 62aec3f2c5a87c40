import { sql } from 'drizzle-orm'
import {
  parametersOf,
  type QueryLogger,
  type Row,
  type Statement,
  type StatementRunner,
} from '../runner'

/**
 * On postgres.js and node-postgres the store's statements go to the client directly instead of
 * through drizzle's query path: drizzle's generic path (placeholder filling, tracing spans, its
 * cache check, mapping each row field by field) cost about as much client CPU as the
 * statements' own encoding and parsing, on every keyed call. They are sent as prepared
 * statements (node-postgres: under their names), and drizzle's logger still sees each one.
 */

/** What the store uses of a postgres.js client (`postgres(url)`) or of one transaction's `sql`. */
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
 * A runner that sends to `client` itself (a pool, or the connection of one transaction) when it
 * is postgres.js or node-postgres, else undefined.
 */
export function directRunnerFor(
  client: unknown,
  logger: QueryLogger | undefined,
): StatementRunner | undefined {
  if (isPostgresJs(client)) {
    return {
      run(statement, values) {
        const params = parametersOf(statement, values)
        logger?.logQuery(statement.text, params)
        // The query itself (a promise postgres.js runs when awaited), with no async wrapper.
        return client.unsafe(statement.text, params, { prepare: true }).values()
      },
      pipelines: true,
    }
  }
  if (isNodePostgres(client)) {
    return {
      async run(statement, values) {
        const params = parametersOf(statement, values)
        logger?.logQuery(statement.text, params)
        const { name, text } = statement
        return (await client.query({ name, text, values: params, rowMode: 'array' })).rows
      },
    }
  }
  return undefined
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

/** What the store uses of a drizzle PostgreSQL session (`db.session`, `tx.session`). */
interface PgSessionLike {
  prepareQuery(
    query: { sql: string; params: unknown[] },
    fields: undefined,
    name: string | undefined,
    isResponseInArrayMode: boolean,
    customResultMapper: (rows: unknown[][]) => unknown[][],
  ): { execute(values: Record<string, unknown>): Promise<unknown[][]> }
}

/**
 * Drizzle's own query path, for drivers the store has no direct runner for (neon, pg-proxy,
 * …): each statement becomes one of drizzle's prepared queries on `db` (a database or a
 * transaction), run in array mode. It carries no query metadata, so a drizzle query cache
 * neither answers it nor is told of its writes: the claim has an INSERT in it, and records
 * change through statements drizzle does not see.
 */
export function drizzleRunner(db: object): StatementRunner {
  const session = (db as { session: PgSessionLike }).session
  const prepared = new WeakMap<Statement, ReturnType<PgSessionLike['prepareQuery']>>()
  const asRows = (rows: unknown[][]) => rows
  return {
    run(statement, values): Promise<Row[]> {
      let query = prepared.get(statement)
      if (query === undefined) {
        const params = statement.params.map((field) => sql.placeholder(field))
        query = session.prepareQuery(
          { sql: statement.text, params },
          undefined,
          statement.name,
          true,
          asRows,
        )
        prepared.set(statement, query)
      }
      return query.execute(values as Record<string, unknown>)
    },
  }
}
