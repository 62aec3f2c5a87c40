import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createClient, type Client as LibsqlClient } from '@libsql/client'
import type BetterSqlite3 from 'better-sqlite3'
import { drizzle as drizzleBetterSqlite3 } from 'drizzle-orm/better-sqlite3'
import { drizzle as drizzleLibsql } from 'drizzle-orm/libsql'
import { drizzle as drizzleMysql } from 'drizzle-orm/mysql2'
import mysql from 'mysql2/promise'
import { afterAll } from 'vitest'
import {
  createDrizzleStore,
  type DrizzleMySqlDatabase,
  type DrizzleSQLiteDatabase,
  defineMySqlIdempotencyTable,
  defineSQLiteIdempotencyTable,
} from '../../src/stores/drizzle'
import { createMySqlStore } from '../../src/stores/drizzle/mysql/store'
import { sqliteBusyTimeoutMs, sqlitePragmas } from './sqlite-binding'

/** Test tables on MySQL are named `im_<base>_p<pid>_<n>`; the global setup drops orphans. */
const mysqlTableName = (base: string, n: number) => `im_${base}_p${process.pid}_${n}`

/** DDL with formatting, quoting and optional words taken out, one statement per entry, sorted. */
export const normalizeDdl = (statements: string[]) =>
  statements
    .map((statement) =>
      statement
        .replace(/[`"]/g, '')
        .replaceAll('IF NOT EXISTS ', '')
        .replace(/\s+/g, ' ')
        .replace(/\s*([(),])\s*/g, '$1')
        .trim()
        .replace(/;$/, ''),
    )
    .filter((statement) => statement.length > 0)
    .sort()

/** The statements of a SQL file shipped under src/stores/drizzle/, comments left out. */
export function shippedStatements(file: string): string[] {
  return readFileSync(new URL(`../../src/stores/drizzle/${file}`, import.meta.url), 'utf8')
    .split('\n')
    .filter((line) => !line.startsWith('--'))
    .join('\n')
    .split(';')
}

/** A drizzle logger that keeps the statements sent. */
export function statementLog() {
  const statements: string[] = []
  return {
    statements,
    logger: { logQuery: (query: string) => void statements.push(query) },
    async count(action: () => Promise<unknown>): Promise<number> {
      const before = statements.length
      await action()
      return statements.length - before
    },
  }
}

/**
 * A MySQL pool for one test file, and stores over new tables in it (dropped after the file).
 * `server` forces the MySQL 8 path (no RETURNING) on MariaDB.
 */
export function useMySql(url: string, base: string) {
  const pool = mysql.createPool({ uri: url, connectionLimit: 10 })
  const log = statementLog()
  const db = drizzleMysql({ client: pool })
  const counted = drizzleMysql({ client: pool, logger: log.logger })
  const created: string[] = []
  afterAll(async () => {
    for (const name of created) await pool.query(`drop table if exists \`${name}\``)
    await pool.end()
  })
  return {
    pool,
    db,
    log,
    /** A store over a new, empty table; `counted` sends through the logging database. */
    async createStore(
      options: {
        server?: 'mysql' | 'mariadb'
        counted?: boolean
        database?: DrizzleMySqlDatabase
      } = {},
    ) {
      const name = mysqlTableName(base, created.length + 1)
      created.push(name)
      const table = defineMySqlIdempotencyTable(name)
      const target = options.database ?? (options.counted ? counted : db)
      const store = options.server
        ? createMySqlStore(target, { table }, options.server)
        : createDrizzleStore(target, { table })
      await store.ensureTable()
      return store
    },
  }
}

/** A temporary folder for one test file's SQLite files, removed after it. */
export function useSqliteFolder(prefix: string) {
  const folder = mkdtempSync(join(tmpdir(), `im-${prefix}-`))
  const clients: { close(): void }[] = []
  afterAll(() => {
    for (const client of clients) client.close()
    rmSync(folder, { recursive: true, force: true })
  })
  return {
    folder,
    /** A libSQL client on `name` in the folder, in WAL mode with a busy timeout. */
    async libsql(name: string): Promise<LibsqlClient> {
      const client = createClient({
        url: `file:${join(folder, name)}`,
        timeout: sqliteBusyTimeoutMs,
      })
      clients.push(client)
      for (const pragma of sqlitePragmas) await client.execute(pragma)
      return client
    },
    /** A better-sqlite3 database on `name`, in WAL mode with a busy timeout. */
    betterSqlite3(load: (file: string) => BetterSqlite3.Database, name: string) {
      const database = load(join(folder, name))
      clients.push(database)
      for (const pragma of sqlitePragmas) database.exec(pragma)
      return database
    },
  }
}

/** Stores over new tables of one SQLite database. */
export function sqliteTables(db: DrizzleSQLiteDatabase) {
  let count = 0
  return async (database: DrizzleSQLiteDatabase = db) => {
    const store = createDrizzleStore(database, {
      table: defineSQLiteIdempotencyTable(`t${++count}`),
    })
    await store.ensureTable()
    return store
  }
}

export { drizzleBetterSqlite3, drizzleLibsql }
