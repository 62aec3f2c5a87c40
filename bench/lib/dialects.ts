/**
 * The Drizzle store's other dialects for the bench: MariaDB through mysql2 (when MYSQL_URL is
 * set), and SQLite on a file of this run's own, through libSQL and through better-sqlite3 (WAL,
 * the pragmas docs/drizzle-dialects.md gives for several writers). Each works in tables of its
 * own (`im_bench_<pid>_...`), dropped at the end.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createClient } from '@libsql/client'
import { drizzle as drizzleBetterSqlite3 } from 'drizzle-orm/better-sqlite3'
import { drizzle as drizzleLibsql } from 'drizzle-orm/libsql'
import { drizzle as drizzleMysql } from 'drizzle-orm/mysql2'
import mysql from 'mysql2/promise'
import { betterSqlite3 } from '../../test/stores/sqlite-binding'
import { type BackendName, type Database, schemaName } from './database'
import type { Counter } from './peers'

export type DialectName = Extract<BackendName, 'mariadb' | 'libsql' | 'better-sqlite3'>

/** Why `backend` cannot run here, or undefined when it can. */
export function dialectMissing(backend: DialectName, mysqlUrl: string | undefined) {
  if (backend === 'mariadb') return mysqlUrl ? undefined : 'MYSQL_URL is not set'
  if (backend === 'better-sqlite3') return betterSqlite3().reason
  return undefined
}

export async function openDialect(
  backend: DialectName,
  mysqlUrl: string | undefined,
): Promise<Database> {
  const statements: Counter = { count: 0 }
  const logger = {
    logQuery() {
      statements.count++
    },
  }
  if (backend === 'mariadb') return openMariaDb(mysqlUrl!, statements, logger)
  const folder = await mkdtemp(join(tmpdir(), `${schemaName}-`))
  const file = join(folder, 'bench.db')
  const settings: Record<string, string> = {}
  let database: Omit<Database, 'settings' | 'table' | 'backend' | 'statements' | 'schema'>
  if (backend === 'libsql') {
    // libSQL's pool: the busy timeout goes to every connection through the client's option.
    const client = createClient({ url: `file:${file}`, timeout: 10_000 })
    await client.execute('PRAGMA journal_mode = WAL')
    const query = async <Row>(text: string, params: unknown[] = []) =>
      (await client.execute({ sql: text, args: params as never[] })).rows as unknown as Row[]
    database = {
      db: drizzleLibsql({ client, logger }),
      query,
      poolSize: 1,
      close: async () => client.close(),
    }
    const [version] = await query<{ v: string }>('select sqlite_version() as v')
    settings.server_version = `SQLite ${version?.v} (libSQL)`
  } else {
    const sqlite = betterSqlite3().load!(file)
    sqlite.pragma('journal_mode = WAL')
    sqlite.pragma('busy_timeout = 10000')
    database = {
      db: drizzleBetterSqlite3({ client: sqlite, logger }),
      query: async <Row>(text: string, params: unknown[] = []) => {
        const statement = sqlite.prepare(text)
        if (statement.reader) return statement.all(...params) as Row[]
        statement.run(...params)
        return []
      },
      poolSize: 1,
      close: async () => {
        sqlite.close()
      },
    }
    settings.server_version = `SQLite ${String(sqlite.prepare('select sqlite_version() as v').pluck().get())} (better-sqlite3)`
  }
  for (const name of ['journal_mode', 'synchronous']) {
    const [row] = await database.query(`PRAGMA ${name}`)
    settings[name] = String(Object.values(row ?? {})[0])
  }
  return {
    ...database,
    backend,
    statements,
    schema: schemaName,
    table: (drizzle, name) => ({
      table: drizzle.defineSQLiteIdempotencyTable(`${schemaName}_${name}`),
    }),
    settings,
    close: async () => {
      await database.close()
      await rm(folder, { recursive: true, force: true })
    },
  }
}

async function openMariaDb(
  url: string,
  statements: Counter,
  logger: { logQuery(): void },
): Promise<Database> {
  const poolSize = 20
  const pool = mysql.createPool({ uri: url, connectionLimit: poolSize })
  const query = async <Row>(text: string, params: unknown[] = []) => {
    const [rows] = await pool.query(text, params)
    return (Array.isArray(rows) ? rows : []) as Row[]
  }
  const tables = new Set<string>()
  const settings: Record<string, string> = {}
  for (const name of ['innodb_flush_log_at_trx_commit', 'sync_binlog', 'version']) {
    const [row] = await query<{ Value: string }>(`show variables like '${name}'`)
    settings[name === 'version' ? 'server_version' : name] = String(row?.Value)
  }
  return {
    backend: 'mariadb',
    db: drizzleMysql({ client: pool, logger, mode: 'default' }),
    statements,
    query,
    schema: schemaName,
    poolSize,
    table: (drizzle, name) => {
      tables.add(`${schemaName}_${name}`)
      return { table: drizzle.defineMySqlIdempotencyTable(`${schemaName}_${name}`) }
    },
    settings,
    close: async () => {
      for (const table of tables) await query(`drop table if exists \`${table}\``)
      await pool.end()
    },
  }
}
