import {
  customType,
  datetime,
  index,
  type MySqlColumn,
  mysqlTable,
  primaryKey,
} from 'drizzle-orm/mysql-core'
import type { RecordStatus } from '../../../store'
import { checkedTableName, defaultIdempotencyTableName } from '../table'

/**
 * Text compared byte for byte. MySQL's and MariaDB's default collations ignore case (and, on
 * MySQL 8, accents), so keys `abc` and `ABC`, or two lease tokens that differ in case, would be
 * one: every text column of the table is utf8mb4 with the binary collation.
 */
const exactText = customType<{ data: string; config: { length: number } }>({
  dataType: (config) =>
    config === undefined
      ? 'longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin'
      : `varchar(${config.length}) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`,
})

/**
 * The longest scope the table holds, in characters. The primary key (scope, key) must fit
 * InnoDB's 3,072-byte index limit at 4 bytes a character: 512 + 255 characters does.
 */
export const mysqlScopeLength = 512

function columns() {
  return {
    scope: exactText('scope', { length: mysqlScopeLength }).notNull(),
    key: exactText('key', { length: 255 }).notNull(),
    fingerprint: exactText('fingerprint', { length: 255 }).notNull(),
    status: exactText('status', { length: 16 }).$type<RecordStatus>().notNull(),
    response: exactText('response'),
    leaseToken: exactText('lease_token', { length: 255 }).notNull(),
    // UTC, from the server's clock (UTC_TIMESTAMP(3)), to the millisecond.
    lockedUntil: datetime('locked_until', { fsp: 3, mode: 'string' }).notNull(),
    expiresAt: datetime('expires_at', { fsp: 3, mode: 'string' }).notNull(),
  }
}

function build<TName extends string>(name: TName) {
  return mysqlTable(
    name,
    columns(),
    (table: { scope: MySqlColumn; key: MySqlColumn; expiresAt: MySqlColumn }) => [
      primaryKey({ name: `${name}_pkey`, columns: [table.scope, table.key] }),
      // sweep() range-scans this index instead of the whole table.
      index(`${name}_expires_at_idx`).on(table.expiresAt),
    ],
  )
}

/** A MySQL or MariaDB table of idempotency records: `mysqlIdempotencyKeys` or one you define. */
export type MySqlIdempotencyTable = ReturnType<typeof build<string>>

/**
 * Defines the MySQL/MariaDB records table under your own name, for your drizzle-kit schema.
 * Pass the result to `createDrizzleStore(db, { table })`.
 */
export function defineMySqlIdempotencyTable(
  name: string = defaultIdempotencyTableName,
): MySqlIdempotencyTable {
  return build(checkedTableName(name))
}

/** The MySQL/MariaDB records table, `idempotency_keys`, for drizzle-kit or `ensureTable()`. */
export const mysqlIdempotencyKeys = defineMySqlIdempotencyTable()
