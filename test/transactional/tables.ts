import { type PgDatabase, type PgQueryResultHKT, pgSchema, serial, text } from 'drizzle-orm/pg-core'
import { defineIdempotencyTable } from '../../src/stores/drizzle'

// Table definitions and the business write, without vitest: child processes import them too.

export type AnyPgDatabase = PgDatabase<PgQueryResultHKT, Record<string, unknown>>

/**
 * The tables of one test file, all in its own Postgres schema (`im_tx_<file>`): the records
 * table `keys` and a business table `orders` whose `ref` names the test and key that wrote a
 * row, so tests of one file never count each other's rows.
 */
export function defineTables(schema: string) {
  const orders = pgSchema(schema).table('orders', {
    id: serial('id').primaryKey(),
    ref: text('ref').notNull(),
    item: text('item').notNull(),
  })
  return { orders, keys: defineIdempotencyTable('keys', schema) }
}
export type Orders = ReturnType<typeof defineTables>['orders']

/** Inserts one order row through `tx`; what handlers write. */
export async function insertOrder(
  tx: AnyPgDatabase | unknown,
  orders: Orders,
  ref: string,
  item: string,
) {
  const [row] = await (tx as AnyPgDatabase)
    .insert(orders)
    .values({ ref, item })
    .returning({ id: orders.id })
  if (!row) throw new Error('insert returned no row')
  return { id: row.id, item }
}
