import { existsSync } from 'node:fs'
import type { InspectableStore } from '../src/store'
import type { StoreLocation } from './args'

/**
 * The store the CLI works on, opened from `DATABASE_URL` or `REDIS_URL` with the drivers the
 * user has installed (the package's optional peers): it loads whichever is there, and never
 * creates a table.
 */
export interface OpenedStore {
  store: InspectableStore
  /** What it is, for the output: `postgres (postgres.js), table "idempotency_keys"`. */
  description: string
  /** Redis deletes expired records itself: there, a sweep has nothing to do. */
  selfExpiring: boolean
  close(): Promise<void>
}

/** The environment or the installed packages cannot open a store (exit code 2). */
export class SetupError extends Error {
  override name = 'SetupError'
}

const seconds = 10

export async function openStore(location: StoreLocation): Promise<OpenedStore> {
  const { databaseUrl, redisUrl } = location
  if (redisUrl !== undefined) {
    if (location.table !== undefined || location.schema !== undefined) {
      throw new SetupError('--table and --schema are for DATABASE_URL; Redis takes --prefix')
    }
    return openRedis(redisUrl, location.prefix)
  }
  const url = databaseUrl!
  if (location.prefix !== undefined) {
    throw new SetupError('--prefix is for REDIS_URL; a database takes --table (and --schema)')
  }
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1]?.toLowerCase()
  if (scheme === 'postgres' || scheme === 'postgresql') return openPostgres(url, location)
  if (location.schema !== undefined) throw new SetupError('--schema is for PostgreSQL')
  if (scheme === 'mysql' || scheme === 'mariadb') return openMySql(url, location.table)
  if (scheme === 'file' || scheme === 'libsql') return openSqlite(url, location.table)
  throw new SetupError(
    `DATABASE_URL must start with postgres://, mysql://, file: or libsql:// (got ${scheme ? `${scheme}:` : 'no scheme'})`,
  )
}

/**
 * `name`, imported from where this package is installed (beside it in node_modules), or
 * undefined when it is not installed. A package that is there and fails to load throws.
 */
async function optionalImport<T>(name: string, load: () => Promise<T>): Promise<T | undefined> {
  try {
    return await load()
  } catch (error) {
    const { code, message } = error as { code?: unknown; message?: unknown }
    const missing = code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND'
    if (missing && String(message).includes(`'${name}`)) return undefined
    throw error
  }
}

/** The Drizzle store's module, which needs drizzle-orm installed. */
async function drizzleStoreModule() {
  const module = await optionalImport('drizzle-orm', () => import('../src/stores/drizzle/index'))
  if (module === undefined) {
    throw new SetupError(
      'DATABASE_URL needs drizzle-orm installed beside idempotent-mutations (npm install drizzle-orm)',
    )
  }
  return module
}

const quoted = (name: string) => JSON.stringify(name)

async function openPostgres(url: string, location: StoreLocation): Promise<OpenedStore> {
  const { createDrizzleStore, defineIdempotencyTable, defaultIdempotencyTableName } =
    await drizzleStoreModule()
  const name = location.table ?? defaultIdempotencyTableName
  const table = defineIdempotencyTable(name, location.schema)
  const where = `table ${location.schema === undefined ? '' : `${quoted(location.schema)}.`}${quoted(name)}`

  const postgresJs = await optionalImport('postgres', () => import('postgres'))
  if (postgresJs !== undefined) {
    const { drizzle } = await import('drizzle-orm/postgres-js')
    const client = postgresJs.default(url, {
      max: 1,
      connect_timeout: seconds,
      fetch_types: false,
      onnotice: () => {},
    })
    return {
      store: createDrizzleStore(drizzle({ client }), { table }),
      description: `PostgreSQL (postgres.js), ${where}`,
      selfExpiring: false,
      close: () => client.end({ timeout: seconds }),
    }
  }
  const pg = await optionalImport('pg', () => import('pg'))
  if (pg !== undefined) {
    const { drizzle } = await import('drizzle-orm/node-postgres')
    const pool = new pg.default.Pool({
      connectionString: url,
      max: 1,
      connectionTimeoutMillis: seconds * 1000,
    })
    pool.on('error', () => {})
    return {
      store: createDrizzleStore(drizzle({ client: pool }), { table }),
      description: `PostgreSQL (node-postgres), ${where}`,
      selfExpiring: false,
      close: () => pool.end(),
    }
  }
  throw new SetupError(
    'a postgres:// DATABASE_URL needs a PostgreSQL driver installed beside idempotent-mutations: postgres (postgres.js) or pg (node-postgres)',
  )
}

async function openMySql(url: string, tableName: string | undefined): Promise<OpenedStore> {
  const { createDrizzleStore, defineMySqlIdempotencyTable, defaultIdempotencyTableName } =
    await drizzleStoreModule()
  const mysql = await optionalImport('mysql2', () => import('mysql2/promise'))
  if (mysql === undefined) {
    throw new SetupError(
      'a mysql:// DATABASE_URL needs mysql2 installed beside idempotent-mutations',
    )
  }
  const { drizzle } = await import('drizzle-orm/mysql2')
  const name = tableName ?? defaultIdempotencyTableName
  const pool = mysql.default.createPool({
    uri: url.replace(/^mariadb:/i, 'mysql:'),
    connectionLimit: 1,
    connectTimeout: seconds * 1000,
  })
  return {
    store: createDrizzleStore(drizzle({ client: pool }), {
      table: defineMySqlIdempotencyTable(name),
    }),
    description: `MySQL/MariaDB (mysql2), table ${quoted(name)}`,
    selfExpiring: false,
    close: () => pool.end(),
  }
}

async function openSqlite(url: string, tableName: string | undefined): Promise<OpenedStore> {
  const { createDrizzleStore, defineSQLiteIdempotencyTable, defaultIdempotencyTableName } =
    await drizzleStoreModule()
  const name = tableName ?? defaultIdempotencyTableName
  const table = defineSQLiteIdempotencyTable(name)
  const file = url.startsWith('file:') ? url.replace(/^file:(\/\/)?/, '') : undefined
  // A path that does not exist would be created empty: say so instead.
  if (file !== undefined && !existsSync(file)) {
    throw new SetupError(`there is no SQLite database at ${file}`)
  }
  const where = `table ${quoted(name)}`

  const libsql = await optionalImport('@libsql/client', () => import('@libsql/client'))
  if (libsql !== undefined) {
    const { drizzle } = await import('drizzle-orm/libsql')
    const client = libsql.createClient({ url })
    return {
      store: createDrizzleStore(drizzle({ client }), { table }),
      description: `SQLite (libSQL), ${where}`,
      selfExpiring: false,
      close: async () => client.close(),
    }
  }
  const betterSqlite = await optionalImport('better-sqlite3', () => import('better-sqlite3'))
  if (betterSqlite !== undefined && file !== undefined) {
    const { drizzle } = await import('drizzle-orm/better-sqlite3')
    const client = new betterSqlite.default(file, { fileMustExist: true })
    // Wait for a writing app instead of failing at once with SQLITE_BUSY.
    client.pragma(`busy_timeout = ${seconds * 1000}`)
    return {
      store: createDrizzleStore(drizzle({ client }), { table }),
      description: `SQLite (better-sqlite3), ${where}`,
      selfExpiring: false,
      close: async () => void client.close(),
    }
  }
  throw new SetupError(
    file === undefined
      ? 'a libsql:// DATABASE_URL needs @libsql/client installed beside idempotent-mutations'
      : 'a file: DATABASE_URL needs @libsql/client or better-sqlite3 installed beside idempotent-mutations',
  )
}

async function openRedis(url: string, prefix: string | undefined): Promise<OpenedStore> {
  const { createRedisStore } = await import('../src/stores/redis/index')
  const where = `prefix ${quoted(prefix ?? 'idem:')}`

  const ioredis = await optionalImport('ioredis', () => import('ioredis'))
  if (ioredis !== undefined) {
    const client = new ioredis.Redis(url, {
      lazyConnect: true,
      connectTimeout: seconds * 1000,
      maxRetriesPerRequest: 1,
      // One attempt: an operator's command fails instead of reconnecting forever.
      retryStrategy: () => null,
    })
    client.on('error', () => {})
    await client.connect()
    return {
      store: createRedisStore(client, { prefix }),
      description: `Redis (ioredis), ${where}`,
      selfExpiring: true,
      close: async () => void (await client.quit()),
    }
  }
  const nodeRedis = await optionalImport('redis', () => import('redis'))
  if (nodeRedis !== undefined) {
    const client = nodeRedis.createClient({
      url,
      socket: { connectTimeout: seconds * 1000, reconnectStrategy: false },
    })
    client.on('error', () => {})
    await client.connect()
    return {
      store: createRedisStore(client, { prefix }),
      description: `Redis (node-redis), ${where}`,
      selfExpiring: true,
      // node-redis 5 and 6 close(); 4 has quit() only.
      close: async () => {
        const { close, quit } = client as {
          close?: () => Promise<unknown>
          quit: () => Promise<unknown>
        }
        await (close ?? quit).call(client)
      },
    }
  }
  throw new SetupError(
    'REDIS_URL needs a Redis client installed beside idempotent-mutations: ioredis or redis (node-redis)',
  )
}
