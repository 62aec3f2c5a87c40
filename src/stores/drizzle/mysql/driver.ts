import {
  clientOf,
  parametersOf,
  type QueryLogger,
  type StatementRunner,
  sessionClientOf,
} from '../runner'

/** What the store uses of a mysql2 pool or connection (promise API, as drizzle holds it). */
interface Mysql2Client {
  query(options: {
    sql: string
    values: unknown[]
    rowsAsArray: true
  }): Promise<[unknown[][] | { affectedRows: number }, unknown]>
}

/**
 * A runner on mysql2 (`drizzle-orm/mysql2`), or undefined for another MySQL driver. Statements go
 * to drizzle's own client (the promise API of the pool or connection you gave it) as text
 * protocol queries with mysql2's escaping, past drizzle's query path; drizzle's logger still
 * sees each one. A statement without a result set answers `[[affectedRows]]`: the rows it
 * matched (mysql2 connects with CLIENT_FOUND_ROWS) or changed, which are the same for the
 * store's UPDATEs (each changes a column its WHERE tests) and DELETEs.
 */
export function mysql2RunnerOf(
  db: object,
  logger: QueryLogger | undefined,
): StatementRunner | undefined {
  const client = sessionClientOf(db) as Record<string, unknown> | undefined
  const isMysql2 =
    clientOf(db) !== undefined &&
    typeof client === 'object' &&
    typeof client.query === 'function' &&
    typeof client.execute === 'function' &&
    (typeof client.getConnection === 'function' || typeof client.beginTransaction === 'function')
  if (!isMysql2) return undefined
  const mysql2 = client as unknown as Mysql2Client
  return {
    async run(statement, values) {
      const params = parametersOf(statement, values)
      logger?.logQuery(statement.text, params)
      const [result] = await mysql2.query({
        sql: statement.text,
        values: params,
        rowsAsArray: true,
      })
      return Array.isArray(result) ? result : [[result.affectedRows]]
    },
  }
}
