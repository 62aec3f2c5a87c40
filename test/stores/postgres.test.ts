import { randomUUID } from 'node:crypto'
import { drizzle as drizzleNodePg } from 'drizzle-orm/node-postgres'
import { drizzle as drizzlePostgresJs } from 'drizzle-orm/postgres-js'
import pg from 'pg'
import postgres from 'postgres'
import { afterAll, describe, expect, it } from 'vitest'
import { databaseUrl } from '../support/env'
import { describeStoreConformance } from './conformance'
import { describeDrizzleBehaviour } from './drizzle-behaviour'
import { statementCounter, useTestTables } from './drizzle-fixtures'

const skipped = databaseUrl ? '' : ' (skipped: DATABASE_URL is not set)'

const url = databaseUrl ?? 'postgres://unset'

describe.skipIf(!databaseUrl)(`drizzle store on PostgreSQL [postgres]${skipped}`, () => {
  describe('through postgres.js', () => {
    // A pool of several connections, so claims race inside the server, not in a queue.
    const client = postgres(url, { max: 10, onnotice: () => {} })
    const counted = postgres(url, { max: 2, onnotice: () => {} })
    afterAll(() => Promise.all([client.end(), counted.end()]))
    const db = drizzlePostgresJs({ client })
    const counter = statementCounter()
    const countedDb = drizzlePostgresJs({ client: counted, logger: counter.logger })
    const tables = useTestTables(() => db, 'im_test_store_postgresjs')

    describeStoreConformance({
      name: 'drizzle on postgres.js [postgres]',
      createStore: () => tables.createStore(),
      concurrency: 150,
    })
    describeDrizzleBehaviour({
      name: 'postgres.js [postgres]',
      createCountedStore: () => tables.createStore(countedDb),
      counter,
      db: () => db,
    })
  })

  describe('through node-postgres', () => {
    const pool = new pg.Pool({ connectionString: url, max: 10 })
    const counted = new pg.Pool({ connectionString: url, max: 2 })
    afterAll(() => Promise.all([pool.end(), counted.end()]))
    const db = drizzleNodePg({ client: pool })
    const counter = statementCounter()
    const countedDb = drizzleNodePg({ client: counted, logger: counter.logger })
    const tables = useTestTables(() => db, 'im_test_store_nodepg')

    describeStoreConformance({
      name: 'drizzle on node-postgres [postgres]',
      createStore: () => tables.createStore(),
      concurrency: 150,
    })
    describeDrizzleBehaviour({
      name: 'node-postgres [postgres]',
      createCountedStore: () => tables.createStore(countedDb),
      counter,
      db: () => db,
    })

    it('runs its statements as named prepared statements, parsed once per connection [postgres]', async () => {
      const connection = new pg.Client({ connectionString: url })
      await connection.connect()
      try {
        const store = await tables.createStore(drizzleNodePg({ client: connection }))
        const claim = {
          scope: 's',
          key: randomUUID(),
          fingerprint: 'f',
          leaseToken: 't',
          lockTimeoutMs: 60_000,
          ttlMs: 60_000,
        }
        await store.claim(claim)
        await store.claim({ ...claim, leaseToken: 'u' })
        await store.complete({ ...claim, response: 'r' })
        const { rows } = await connection.query<{ name: string }>(
          'select name from pg_prepared_statements order by name',
        )
        const names = rows.map((row) => row.name.replace(/_[0-9a-f]{12}$/, ''))
        expect(names).toEqual(['idempotent_mutations_claim', 'idempotent_mutations_complete'])
      } finally {
        await connection.end()
      }
    })

    it('two stores over two tables on one connection keep their statements apart [postgres]', async () => {
      const connection = new pg.Client({ connectionString: url })
      await connection.connect()
      try {
        const db = drizzleNodePg({ client: connection })
        const first = await tables.createStore(db)
        const second = await tables.createStore(db)
        const claim = {
          scope: 's',
          key: 'k',
          fingerprint: 'f',
          leaseToken: 't',
          lockTimeoutMs: 1,
          ttlMs: 60_000,
        }
        expect((await first.claim(claim)).claimed).toBe(true)
        expect((await second.claim(claim)).claimed).toBe(true)
        expect((await first.get('s', 'k'))?.leaseToken).toBe('t')
        expect((await second.get('s', 'k'))?.leaseToken).toBe('t')
      } finally {
        await connection.end()
      }
    })
  })
})
