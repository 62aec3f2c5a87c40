/**
 * The databases the bench runs on: embedded PGlite always, real PostgreSQL (postgres.js) when
 * DATABASE_URL is set; the other dialects of the Drizzle store in ./dialects.ts. Every run works
 * in its own schema, `im_bench_<pid>`, dropped at the end: other people's tests share the
 * database and their tables are never touched.
 */
import { PGlite } from '@electric-sql/pglite'
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite'
import { drizzle as drizzlePostgresJs } from 'drizzle-orm/postgres-js'
import postgres from 'postgres'
import type {
  DrizzleMySqlDatabase,
  DrizzlePgDatabase,
  DrizzleSQLiteDatabase,
} from '../../src/stores/drizzle'
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
export type PgDatabase = Database & { db: DrizzlePgDatabase }

export const schemaName = `im_bench_${process.pid}`

export async function openDatabase(
  backend: BackendName,
  databaseUrl: string | undefined,
): Promise<PgDatabase> {
  const statements: Counter = { count: 0 }
  const logger = {
    logQuery() {
      statements.count++
    },
  }
  let database: Omit<PgDatabase, 'settings' | 'table'>
  if (backend === 'pglite') {
    const client = new PGlite()
    database = {
      backend,
      db: drizzlePglite({ client, logger }),
      statements,
      query: async <Row>(text: string, params: unknown[] = []) =>
        (await client.query<Row>(text, params)).rows,
      schema: schemaName,
      poolSize: 1,
      close: () => client.close(),
    }
  } else {
    if (!databaseUrl) throw new Error('bench: the postgres backend needs DATABASE_URL')
    const poolSize = 20
    const client = postgres(databaseUrl, { max: poolSize, onnotice: () => {} })
    database = {
      backend,
      db: drizzlePostgresJs({ client, logger }),
      statements,
      // `unsafe` with `prepare: true` sends a named prepared statement, as drizzle's are.
      query: async <Row>(text: string, params: unknown[] = []) =>
        (await client.unsafe(text, params as never[], { prepare: true })) as unknown as Row[],
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
    table: (drizzle, name) => ({ table: drizzle.defineIdempotencyTable(name, schemaName) }),
    settings,
    close: async () => {
      await database.query(`drop schema if exists "${schemaName}" cascade`)
      await database.close()
    },
  }
}
