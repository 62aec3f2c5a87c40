import { PGlite } from '@electric-sql/pglite'
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite'
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js'
import postgres from 'postgres'
import { afterAll } from 'vitest'
import { createMemoryStore, type IdempotencyStore } from '../../src'
import { useTestTables } from '../stores/drizzle-fixtures'
import { databaseUrl, testSchema } from '../support/env'

/**
 * The stores a plain-HTTP suite runs on: memory, the Drizzle store on PGlite, and on PostgreSQL
 * when DATABASE_URL is set (tagged `[postgres]`). Each test file gets its own schemas.
 */
export function useHttpStores(file: string) {
  const pglite = new PGlite()
  const sql = databaseUrl ? postgres(databaseUrl, { max: 20, onnotice: () => {} }) : undefined
  // Registered first, so they run last: the tables' clean-up needs the connections.
  afterAll(async () => {
    await pglite.close()
    await sql?.end()
  })
  const onPglite = useTestTables(() => drizzlePglite({ client: pglite }), `im_test_${file}_pglite`)
  const onPostgres = sql
    ? useTestTables(() => drizzlePostgres({ client: sql }), testSchema(`im_test_${file}`))
    : undefined
  const skipped = databaseUrl ? '' : ' (skipped: DATABASE_URL is not set)'
  return [
    {
      name: 'memory',
      createStore: async (): Promise<IdempotencyStore> => createMemoryStore(),
      skip: false,
    },
    {
      name: 'Drizzle on PGlite',
      createStore: async (): Promise<IdempotencyStore> => onPglite.createStore(),
      skip: false,
    },
    {
      name: `Drizzle on PostgreSQL [postgres]${skipped}`,
      createStore: async (): Promise<IdempotencyStore> => onPostgres!.createStore(),
      skip: !databaseUrl,
    },
  ]
}
