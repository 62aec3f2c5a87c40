import { is } from 'drizzle-orm'
import { MySqlDatabase } from 'drizzle-orm/mysql-core'
import { BaseSQLiteDatabase } from 'drizzle-orm/sqlite-core'
import {
  createMySqlStore,
  type DrizzleMySqlDatabase,
  type DrizzleMySqlStore,
  type DrizzleMySqlStoreOptions,
} from './mysql/store'
import {
  createPostgresStore,
  type DrizzlePgDatabase,
  type DrizzleStore,
  type DrizzleStoreOptions,
  type DrizzleTransactionOf,
} from './postgres/store'
import {
  createSQLiteStore,
  type DrizzleSQLiteDatabase,
  type DrizzleSQLiteStore,
  type DrizzleSQLiteStoreOptions,
} from './sqlite/store'

/**
 * Records in your own database through drizzle, on each dialect drizzle speaks: PostgreSQL
 * (postgres.js, node-postgres, PGlite, …), MySQL and MariaDB (mysql2), SQLite (libSQL,
 * better-sqlite3, …). Times come from the database's clock; commits are its normal durable
 * ones. Transactional mode (the record commits with your writes) is PostgreSQL's.
 *
 * ```ts
 * const store = createDrizzleStore(db)
 * await store.ensureTable()
 * ```
 */
export function createDrizzleStore(
  db: DrizzleMySqlDatabase,
  options?: DrizzleMySqlStoreOptions,
): DrizzleMySqlStore
export function createDrizzleStore(
  db: DrizzleSQLiteDatabase,
  options?: DrizzleSQLiteStoreOptions,
): DrizzleSQLiteStore
// PostgreSQL last: `Parameters<typeof createDrizzleStore>` reads the last overload.
export function createDrizzleStore<TDatabase extends DrizzlePgDatabase>(
  db: TDatabase,
  options?: DrizzleStoreOptions,
): DrizzleStore<DrizzleTransactionOf<TDatabase>>
export function createDrizzleStore(
  db: DrizzlePgDatabase | DrizzleMySqlDatabase | DrizzleSQLiteDatabase,
  options: DrizzleStoreOptions | DrizzleMySqlStoreOptions | DrizzleSQLiteStoreOptions = {},
): DrizzleStore<unknown> | DrizzleMySqlStore | DrizzleSQLiteStore {
  // `withReplicas(primary, replicas)` sends selects (the claim may be one, with an INSERT in
  // it) to a replica, which cannot write and may lag: the store uses the primary.
  const primary = (db as { $primary?: object } | null)?.$primary ?? db
  if (is(primary, MySqlDatabase)) {
    return createMySqlStore(primary as DrizzleMySqlDatabase, options as DrizzleMySqlStoreOptions)
  }
  if (is(primary, BaseSQLiteDatabase)) {
    return createSQLiteStore(primary as DrizzleSQLiteDatabase, options as DrizzleSQLiteStoreOptions)
  }
  return createPostgresStore(db as DrizzlePgDatabase, options as DrizzleStoreOptions)
}
