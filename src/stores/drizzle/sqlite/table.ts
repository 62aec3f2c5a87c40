import {
  index,
  integer,
  primaryKey,
  type SQLiteColumn,
  sqliteTable,
  text,
} from 'drizzle-orm/sqlite-core'
import type { RecordStatus } from '../../../store'
import { checkedTableName, defaultIdempotencyTableName } from '../table'

function columns() {
  return {
    scope: text('scope').notNull(),
    key: text('key').notNull(),
    fingerprint: text('fingerprint').notNull(),
    status: text('status').$type<RecordStatus>().notNull(),
    response: text('response'),
    leaseToken: text('lease_token').notNull(),
    // Epoch milliseconds from the database's clock.
    lockedUntil: integer('locked_until').notNull(),
    expiresAt: integer('expires_at').notNull(),
  }
}

function build<TName extends string>(name: TName) {
  return sqliteTable(
    name,
    columns(),
    (table: { scope: SQLiteColumn; key: SQLiteColumn; expiresAt: SQLiteColumn }) => [
      primaryKey({ name: `${name}_pkey`, columns: [table.scope, table.key] }),
      // sweep() range-scans this index instead of the whole table.
      index(`${name}_expires_at_idx`).on(table.expiresAt),
    ],
  )
}

/** A SQLite table of idempotency records: `sqliteIdempotencyKeys` or one you define. */
export type SQLiteIdempotencyTable = ReturnType<typeof build<string>>

/**
 * Defines the SQLite records table under your own name, for your drizzle-kit schema. Pass the
 * result to `createDrizzleStore(db, { table })`.
 */
export function defineSQLiteIdempotencyTable(
  name: string = defaultIdempotencyTableName,
): SQLiteIdempotencyTable {
  return build(checkedTableName(name))
}

/** The SQLite records table, `idempotency_keys`, for drizzle-kit or `ensureTable()`. */
export const sqliteIdempotencyKeys = defineSQLiteIdempotencyTable()
