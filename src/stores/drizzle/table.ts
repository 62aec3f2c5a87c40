import {
  type AnyPgColumn,
  index,
  pgSchema,
  pgTable,
  primaryKey,
  text,
  timestamp,
} from 'drizzle-orm/pg-core'
import type { RecordStatus } from '../../store'

/** The table name `idempotencyKeys` uses, and `defineIdempotencyTable` without a name. */
export const defaultIdempotencyTableName = 'idempotency_keys'

// One column set for every table this package defines, so a store can read and write any of
// them with the same statements; only the table's name and schema vary.
function columns() {
  return {
    scope: text('scope').notNull(),
    key: text('key').notNull(),
    fingerprint: text('fingerprint').notNull(),
    status: text('status').$type<RecordStatus>().notNull(),
    response: text('response'),
    leaseToken: text('lease_token').notNull(),
    lockedUntil: timestamp('locked_until', { withTimezone: true }).notNull(),
    expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
  }
}

function constraints(name: string) {
  return (table: { scope: AnyPgColumn; key: AnyPgColumn; expiresAt: AnyPgColumn }) => [
    primaryKey({ name: `${name}_pkey`, columns: [table.scope, table.key] }),
    // sweep() range-scans this index instead of the whole table.
    index(`${name}_expires_at_idx`).on(table.expiresAt),
  ]
}

function build<TName extends string>(name: TName) {
  return pgTable(name, columns(), constraints(name))
}

/** A table that holds idempotency records: `idempotencyKeys` or one from `defineIdempotencyTable`. */
export type IdempotencyTable = ReturnType<typeof build<string>>

const identifier = /^[A-Za-z_][A-Za-z0-9_$]{0,62}$/

/**
 * `name`, if it can name a records table on every dialect. Names go into DDL and statement
 * names: keep them to plain identifiers (63 bytes is Postgres' limit, 64 MySQL's, and the index
 * name adds a suffix to the table name).
 */
export function checkedTableName(name: string): string {
  if (!identifier.test(name) || name.length > 45) {
    throw new TypeError(
      `idempotent-mutations: the table name must be a plain SQL identifier of at most 45 characters (got ${JSON.stringify(name)})`,
    )
  }
  return name
}

/**
 * Defines the records table under your own name and, optionally, Postgres schema, so it can sit
 * in your drizzle-kit schema next to your business tables. Pass the result to
 * `createDrizzleStore(db, { table })`.
 *
 * ```ts
 * export const idempotency = defineIdempotencyTable('idempotency_records', 'billing')
 * ```
 */
export function defineIdempotencyTable(
  name: string = defaultIdempotencyTableName,
  schema?: string,
): IdempotencyTable {
  if (schema === undefined) return build(checkedTableName(name))
  if (!identifier.test(schema)) {
    throw new TypeError(
      `idempotent-mutations: the schema name must be a plain SQL identifier (got ${JSON.stringify(schema)})`,
    )
  }
  // A schema-qualified table differs from a public one only in its schema tag, which the store
  // reads back at run time (getTableConfig): the column types are the same.
  const checked = checkedTableName(name)
  return pgSchema(schema).table(
    checked,
    columns(),
    constraints(checked),
  ) as unknown as IdempotencyTable
}

/**
 * The records table, `idempotency_keys` in the default schema. Export it from your drizzle-kit
 * schema file to manage it with your migrations, or let `store.ensureTable()` create it.
 */
export const idempotencyKeys = defineIdempotencyTable()
