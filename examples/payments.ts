/**
 * The business side the examples share: a `charges` table in the same Postgres database as the
 * idempotency records. Embedded PGlite by default (no server, no setup); `DATABASE_URL`
 * switches to a real PostgreSQL.
 */
import type { Server } from 'node:http'
import { pathToFileURL } from 'node:url'
import { PGlite } from '@electric-sql/pglite'
import { sql } from 'drizzle-orm'
import { integer, pgTable, serial, text, timestamp } from 'drizzle-orm/pg-core'
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite'
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js'
import postgres from 'postgres'

export const charges = pgTable('charges', {
  id: serial('id').primaryKey(),
  via: text('via').notNull(),
  orderId: text('order_id').notNull(),
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
    order_id text NOT NULL,
    amount integer NOT NULL,
    currency text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
  )`)
  return opened
}

/** Called as a resolver starts: the demo slows charges down (a payment provider) and counts queries. */
export type Observe = (what: 'charge' | 'query') => void | Promise<void>

/** True when this module is the script node was started with (not imported by the demo). */
export function isMain(moduleUrl: string): boolean {
  return process.argv[1] !== undefined && moduleUrl === pathToFileURL(process.argv[1]).href
}

/** Listens on 127.0.0.1 (`PORT`, or `fallbackPort`; 0 picks a free one) and returns the URL. */
export function listen(server: Server, fallbackPort: number): Promise<string> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(Number(process.env.PORT ?? fallbackPort), '127.0.0.1', () => {
      const address = server.address()
      resolve(`http://127.0.0.1:${typeof address === 'object' && address ? address.port : address}`)
    })
  })
}
