/**
 * The databases the bench runs on: embedded PGlite always, real PostgreSQL (postgres.js) when
 * DATABASE_URL is set; the other dialects of the Drizzle store in ./dialects.ts. Every run works
 * in its own schema, `im_bench_<pid>`, dropped at the end: other people's tests share the
 * database and their tables are never touched.
 */
import { connect, type Socket } from 'node:net'
import { PGlite } from '@electric-sql/pglite'
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite'
import { drizzle as drizzlePostgresJs } from 'drizzle-orm/postgres-js'
import postgres from 'postgres'
import type {
  DrizzleMySqlDatabase,
  DrizzlePgDatabase,
  DrizzleSQLiteDatabase,
} from '../../src/stores/drizzle'
import type { Query } from '../sections/floor'
import type { Library } from './build'
import type { Counter } from './peers'

export type BackendName = 'pglite' | 'postgres' | 'mariadb' | 'libsql' | 'better-sqlite3'

/** A records table of the backend's dialect, named `name` in this run's own schema or file. */
export type TableOf = (drizzle: Library['drizzle'], name: string) => { table: object }

export interface Database {
  backend: BackendName
  /** The drizzle database handed to the store; every statement it sends adds one to `statements`. */
  db: DrizzlePgDatabase | DrizzleMySqlDatabase | DrizzleSQLiteDatabase
  /** The store's options for a records table of this dialect. */
  table: TableOf
  /** SQL statements sent through `db` (counted by a drizzle logger). */
  statements: Counter
  /** Runs one parameterized statement on the same connection(s), outside drizzle. */
  query<Row = Record<string, unknown>>(text: string, params?: unknown[]): Promise<Row[]>
  /** This run's own schema. */
  schema: string
  /** Connections in the pool (1 for PGlite, which runs one statement at a time). */
  poolSize: number
  /** Server settings that decide whether a commit is durable, and the server's version. */
  settings: Record<string, string>
  close(): Promise<void>
}

/** A PostgreSQL backend: PGlite or a real server. */
export interface PgDatabase extends Database {
  db: DrizzlePgDatabase
  /**
   * Round trips to the server (PostgreSQL only; stays 0 on PGlite): writes to its sockets after
   * it answered. postgres.js gathers what it sends in one tick into one write, and waits for an
   * answer before it sends again unless statements are pipelined.
   */
  roundTrips: Counter
  /**
   * Runs `fn` in one transaction (BEGIN … COMMIT, ROLLBACK if it throws) on one connection; its
   * `query` sends prepared statements on that connection.
   */
  transaction<T>(fn: (query: Query) => Promise<T>): Promise<T>
}

export const schemaName = `im_bench_${process.pid}`

export async function openDatabase(
  backend: BackendName,
  databaseUrl: string | undefined,
): Promise<PgDatabase> {
  const statements: Counter = { count: 0 }
  const roundTrips: Counter = { count: 0 }
  const logger = {
    logQuery() {
      statements.count++
    },
  }
  let database: Omit<PgDatabase, 'settings' | 'table' | 'roundTrips'>
  if (backend === 'pglite') {
    const client = new PGlite()
    database = {
      backend,
      db: drizzlePglite({ client, logger }),
      statements,
      query: async <Row>(text: string, params: unknown[] = []) =>
        (await client.query<Row>(text, params)).rows,
      transaction: (fn) =>
        client.transaction((tx) =>
          fn(
            async <Row>(text: string, params: unknown[]) =>
              (await tx.query<Row>(text, params)).rows,
          ),
        ),
      schema: schemaName,
      poolSize: 1,
      close: () => client.close(),
    }
  } else {
    if (!databaseUrl) throw new Error('bench: the postgres backend needs DATABASE_URL')
    const poolSize = 20
    const client = postgres(databaseUrl, {
      max: poolSize,
      onnotice: () => {},
      // Not in postgres.js's types, but in its docs: a function that returns the socket.
      ...({ socket: () => countingSocket(databaseUrl, roundTrips) } as object),
    })
    database = {
      backend,
      db: drizzlePostgresJs({ client, logger }),
      statements,
      // `unsafe` with `prepare: true` sends a named prepared statement, as the store's are.
      query: async <Row>(text: string, params: unknown[] = []) =>
        (await client.unsafe(text, params as never[], { prepare: true })) as unknown as Row[],
      transaction: <T>(fn: (query: Query) => Promise<T>) =>
        client.begin(
          (sql) =>
            fn(
              async <Row>(text: string, params: unknown[]) =>
                (await sql.unsafe(text, params as never[], { prepare: true })) as unknown as Row[],
            ) as Promise<T>,
        ) as Promise<T>,
      schema: schemaName,
      poolSize,
      close: () => client.end({ timeout: 5 }),
    }
  }
  await database.query(`drop schema if exists "${schemaName}" cascade`)
  await database.query(`create schema "${schemaName}"`)
  const settings: Record<string, string> = {}
  for (const name of ['synchronous_commit', 'fsync', 'server_version']) {
    const [row] = await database.query(`show ${name}`)
    settings[name] = String(Object.values(row ?? {})[0])
  }
  return {
    ...database,
    roundTrips,
    table: (drizzle, name) => ({ table: drizzle.defineIdempotencyTable(name, schemaName) }),
    settings,
    close: async () => {
      await database.query(`drop schema if exists "${schemaName}" cascade`)
      await database.close()
    },
  }
}

/**
 * A socket to the server at `url` that counts its round trips: a write after the server has
 * answered since the last one counted (postgres.js also writes at once when it has gathered
 * 1 KiB, which is more writes but not more round trips).
 */
function countingSocket(url: string, roundTrips: Counter): Socket {
  const { hostname, port } = new URL(url)
  const socket = connect(Number(port || 5432), hostname.replace(/^\[|\]$/g, ''))
  let answered = true
  socket.on('data', () => {
    answered = true
  })
  const write = socket.write.bind(socket) as (...args: unknown[]) => boolean
  socket.write = ((...args: unknown[]) => {
    if (answered) roundTrips.count++
    answered = false
    return write(...args)
  }) as Socket['write']
  return socket
}
