/**
 * The business side the examples share: a `charges` table in the same Postgres database as the
 * idempotency records. Embedded PGlite by default (no server, no setup); `DATABASE_URL`
 * switches to a real PostgreSQL.
 */
import { PGlite } from '@electric-sql/pglite'
import { sql } from 'drizzle-orm'
import { integer, pgTable, serial, text, timestamp } from 'drizzle-orm/pg-core'
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite'
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js'
import postgres from 'postgres'

export const charges = pgTable('charges', {
  id: serial('id').primaryKey(),
  via: text('via').notNull(),
  amount: integer('amount').notNull(),
  currency: text('currency').notNull(),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
})

export type Database = ReturnType<typeof drizzlePglite> | ReturnType<typeof drizzlePostgres>

export interface PaymentsDatabase {
  db: Database
  /** 'PGlite (embedded)' or 'PostgreSQL'. */
  label: string
  close(): Promise<void>
}

/** Opens the database and creates the `charges` table if it is missing. */
export async function openPaymentsDatabase(
  url = process.env.DATABASE_URL,
): Promise<PaymentsDatabase> {
  let opened: PaymentsDatabase
  if (url) {
    const client = postgres(url, { max: 10, onnotice: () => {} })
    opened = { db: drizzlePostgres({ client }), label: 'PostgreSQL', close: () => client.end() }
  } else {
    const client = new PGlite()
    opened = {
      db: drizzlePglite({ client }),
      label: 'PGlite (embedded)',
      close: () => client.close(),
    }
  }
  await opened.db.execute(sql`CREATE TABLE IF NOT EXISTS charges (
    id serial PRIMARY KEY,
    via text NOT NULL,
    amount integer NOT NULL,
    currency text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
  )`)
  return opened
}
