import { PGlite } from '@electric-sql/pglite'
import { sql } from 'drizzle-orm'
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite'
import { drizzle as drizzlePostgresJs } from 'drizzle-orm/postgres-js'
import postgres from 'postgres'
import { createDrizzleStore, type IdempotencyTable } from '../../src/stores/drizzle'
import { databaseUrl } from './env'

/**
 * Two connections, as two app servers would have: real PostgreSQL through postgres.js (two
 * pools) when DATABASE_URL is set, else one embedded PGlite behind both.
 */
export function connectTwoServers() {
  if (databaseUrl) {
    const clients = [1, 2].map(() => postgres(databaseUrl!, { max: 8, onnotice: () => {} }))
    const dbs = clients.map((client) => drizzlePostgresJs({ client }))
    return {
      execute: (query: string) => dbs[0]!.execute(sql.raw(query)),
      stores: (table: IdempotencyTable) => dbs.map((db) => createDrizzleStore(db, { table })),
      close: async () => {
        await Promise.all(clients.map((client) => client.end()))
      },
    }
  }
  const client = new PGlite()
  const db = drizzlePglite({ client })
  return {
    execute: (query: string) => db.execute(sql.raw(query)),
    stores: (table: IdempotencyTable) => [1, 2].map(() => createDrizzleStore(db, { table })),
    close: () => client.close(),
  }
}

/** Where `connectTwoServers` connects, for a describe name (`[postgres]` on real PostgreSQL). */
export const twoServersWhere = databaseUrl
  ? 'on PostgreSQL through postgres.js [postgres]'
  : 'on PGlite (DATABASE_URL is not set)'
