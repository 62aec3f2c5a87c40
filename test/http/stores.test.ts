import { PGlite } from '@electric-sql/pglite'
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite'
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js'
import postgres from 'postgres'
import { afterAll, describe, expect, it } from 'vitest'
import type { IdempotencyStore } from '../../src'
import { useTestTables } from '../stores/drizzle-fixtures'
import { databaseUrl, testSchema } from '../support/env'
import { createHttpApp, gate, json, transports } from './fixtures'

const pglite = new PGlite()
const sql = databaseUrl ? postgres(databaseUrl, { max: 20, onnotice: () => {} }) : undefined
afterAll(async () => {
  await pglite.close()
  await sql?.end()
})
const pgliteTables = useTestTables(() => drizzlePglite({ client: pglite }), 'im_test_http_pglite')
const postgresTables = sql
  ? useTestTables(() => drizzlePostgres({ client: sql }), testSchema('im_test_http'))
  : undefined
const skipped = databaseUrl ? '' : ' (skipped: DATABASE_URL is not set)'

const stores = [
  { name: 'PGlite', createStore: () => pgliteTables.createStore(), skip: false },
  {
    name: `PostgreSQL [postgres]${skipped}`,
    createStore: () => postgresTables!.createStore(),
    skip: !databaseUrl,
  },
]

describe.each(stores)('plain HTTP routes on the Drizzle store, $name', ({ createStore, skip }) => {
  describe.skipIf(skip).each(transports)('through %s', (transport) => {
    const withStore = async () =>
      createHttpApp(transport, { store: (await createStore()) as IdempotencyStore })

    it('runs a keyed POST once and replays it, binary bodies byte for byte', async () => {
      const app = await withStore()
      const first = await app.send('/payments', { key: 'k-1', ...json({ amount: 42 }) })
      const retry = await app.send('/payments', { key: 'k-1', ...json({ amount: 42 }) })
      expect(await retry.text()).toBe(await first.text())
      expect(retry.headers.get('idempotent-replay')).toBe('true')
      const bytes = await (await app.send('/binary', { key: 'k-2' })).arrayBuffer()
      expect(await (await app.send('/binary', { key: 'k-2' })).arrayBuffer()).toEqual(bytes)
      expect(app.charges).toHaveLength(1)
      await app.close()
    })

    it('runs once when 50 concurrent deliveries of one key race; the others get 409 or the replay', async () => {
      const app = await withStore()
      app.hold.gate = gate()
      const deliveries = Array.from({ length: 50 }, () =>
        app.send('/payments', { key: 'k-race', ...json({ amount: 7 }) }),
      )
      await app.hold.arrived.opened
      app.hold.gate.open()
      const statuses = (await Promise.all(deliveries)).map((response) => response.status)
      expect(app.charges).toHaveLength(1)
      expect(statuses.filter((status) => status === 201).length).toBeGreaterThanOrEqual(1)
      expect(statuses.every((status) => status === 201 || status === 409)).toBe(true)
      await app.close()
    })
  })
})
