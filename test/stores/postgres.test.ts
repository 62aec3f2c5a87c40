import { sql } from 'drizzle-orm'
import { drizzle as drizzleNodePg } from 'drizzle-orm/node-postgres'
import { withReplicas } from 'drizzle-orm/pg-core'
import { drizzle as drizzlePostgresJs } from 'drizzle-orm/postgres-js'
import { describeStoreConformance } from 'idempotent-mutations/testing'
import pg from 'pg'
import postgres from 'postgres'
import { afterAll, describe, expect, it } from 'vitest'
import { createIdempotency } from '../../src'
import { databaseUrl, testSchema } from '../support/env'
import { describeDrizzleBehaviour } from './drizzle-behaviour'
import { claimInput, EverythingCache, statementCounter, useTestTables } from './drizzle-fixtures'

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
    const schema = testSchema('im_test_store_postgresjs')
    const tables = useTestTables(() => db, schema)

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

    it('runs every statement on the primary of withReplicas(primary, [replica]) [postgres]', async () => {
      // A replica that refuses writes, as a hot standby does.
      const readOnly = postgres(url, {
        max: 1,
        onnotice: () => {},
        connection: { default_transaction_read_only: true },
      })
      try {
        const replica = drizzlePostgresJs({ client: readOnly })
        await expect(
          replica.execute(sql`create table ${sql.identifier(schema)}.replica_refuses (a int)`),
        ).rejects.toMatchObject({ cause: { code: '25006' } }) // read_only_sql_transaction
        const store = await tables.createStore(withReplicas(db, [replica]))
        const claim = claimInput({ lockTimeoutMs: 0 })
        expect((await store.claim(claim)).claimed).toBe(true)
        expect(await store.get('s', claim.key)).toMatchObject({ status: 'in_progress' })
        // A takeover and a release, then a completion and its replay: all writes.
        const again = { ...claim, leaseToken: 'u' }
        expect(await store.claim(again)).toMatchObject({ claimed: true, takeover: true })
        expect(await store.release(again)).toBe(true)
        expect((await store.claim(claim)).claimed).toBe(true)
        expect(await store.complete({ ...claim, response: 'r' })).toBe(true)
        expect(await store.claim({ ...claim, leaseToken: 'v' })).toMatchObject({
          claimed: false,
          record: { response: 'r' },
        })
        await expect(store.sweep()).resolves.toBeTypeOf('number')
      } finally {
        await readOnly.end()
      }
    })

    it('writes past a drizzle query cache: a cache that fails to hear of a write fails no store call [postgres]', async () => {
      // A cache whose onMutate throws (its backend is down): drizzle tells it of every write it
      // sends, so a write sent through drizzle would fail after the database had done it.
      class DownCache extends EverythingCache {
        override async onMutate(): Promise<never> {
          throw new Error('the cache is down')
        }
      }
      const store = await tables.createStore(drizzlePostgresJs({ client, cache: new DownCache() }))
      const claim = claimInput()
      expect((await store.claim(claim)).claimed).toBe(true)
      expect(await store.release(claim)).toBe(true)
      expect((await store.claim(claim)).claimed).toBe(true)
      expect(await store.complete({ ...claim, response: 'r' })).toBe(true)
      expect(await store.get(claim.scope, claim.key)).toMatchObject({ status: 'completed' })
    })

    it('sends the claim and the completion as named prepared statements, prepared once per connection, each logged once [postgres]', async () => {
      const single = postgres(url, { max: 1, onnotice: () => {} })
      try {
        const logged: string[] = []
        const loggingDb = drizzlePostgresJs({
          client: single,
          logger: { logQuery: (query) => logged.push(query) },
        })
        const store = await tables.createStore(loggingDb)
        logged.length = 0 // ensureTable's statements
        const sent: Array<{ text: string; prepare: unknown }> = []
        const unsafe = single.unsafe.bind(single)
        single.unsafe = ((text: string, params?: never[], options?: { prepare?: boolean }) => {
          sent.push({ text, prepare: options?.prepare })
          return unsafe(text, params, options)
        }) as typeof single.unsafe
        const claim = claimInput()
        expect((await store.claim(claim)).claimed).toBe(true)
        expect(await store.complete({ ...claim, response: 'r' })).toBe(true)
        expect(await store.claim({ ...claim, leaseToken: 'u' })).toMatchObject({
          claimed: false,
          record: { status: 'completed', response: 'r', leaseToken: 't' },
        })
        // A lease that is over at once: its takeover reads the record, then claims under the lock.
        const stale = claimInput({ key: 'stale', lockTimeoutMs: 0 })
        expect((await store.claim(stale)).claimed).toBe(true)
        expect(await store.claim({ ...stale, leaseToken: 'u' })).toMatchObject({
          claimed: true,
          takeover: true,
        })
        expect(await store.release({ ...stale, leaseToken: 'u' })).toBe(true)
        // Each statement once through `unsafe` as a prepared statement, each logged: a first
        // execution is two (insert or read, complete), a replay one, a takeover two (insert or
        // read, claim under the lock), a release one.
        expect(sent.map((call) => call.prepare)).toEqual([true, true, true, true, true, true, true])
        expect(logged).toEqual(sent.map((call) => call.text))
        const [insertOrRead, complete, , , , underLock, release] = sent.map((call) => call.text)
        expect(insertOrRead).toMatch(/^with "inserted" as/)
        expect(complete).toMatch(/^update /)
        expect(underLock).toMatch(/^with "done" as/)
        expect(release).toMatch(/^delete /)
        expect(sent.map((call) => call.text)).toEqual([
          insertOrRead,
          complete,
          insertOrRead,
          insertOrRead,
          insertOrRead,
          underLock,
          release,
        ])
        // Prepared on this one connection once each.
        const prepared = await single`select statement from pg_prepared_statements`
        const texts = prepared.map((row) => row.statement as string)
        for (const text of [insertOrRead, complete, underLock, release]) {
          expect(texts.filter((candidate) => candidate === text)).toHaveLength(1)
        }
      } finally {
        await single.end()
      }
    })
  })

  describe('through node-postgres', () => {
    const pool = new pg.Pool({ connectionString: url, max: 10 })
    const counted = new pg.Pool({ connectionString: url, max: 2 })
    afterAll(() => Promise.all([pool.end(), counted.end()]))
    const db = drizzleNodePg({ client: pool })
    const counter = statementCounter()
    const countedDb = drizzleNodePg({ client: counted, logger: counter.logger })
    const tables = useTestTables(() => db, testSchema('im_test_store_nodepg'))

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

    /** Runs `fn` on a node-postgres connection of its own (prepared statements live per connection). */
    async function withConnection(fn: (connection: pg.Client) => Promise<void>) {
      const connection = new pg.Client({ connectionString: url })
      await connection.connect()
      try {
        await fn(connection)
      } finally {
        await connection.end()
      }
    }

    /** The connection's prepared statements, by name without the per-table tag. */
    async function preparedStatements(connection: pg.Client) {
      const { rows } = await connection.query<{ name: string }>(
        'select name from pg_prepared_statements order by name',
      )
      return rows.map((row) => row.name.replace(/_[0-9a-f]{12}$/, ''))
    }

    it('runs its statements as named prepared statements, parsed once per connection [postgres]', () =>
      withConnection(async (connection) => {
        const logged: string[] = []
        const store = await tables.createStore(
          drizzleNodePg({
            client: connection,
            logger: { logQuery: (query) => logged.push(query) },
          }),
        )
        logged.length = 0 // ensureTable's statements
        const claim = claimInput()
        await store.claim(claim)
        await store.claim({ ...claim, leaseToken: 'u' })
        await store.complete({ ...claim, response: 'r' })
        const stale = claimInput({ key: 'stale', lockTimeoutMs: 0 })
        await store.claim(stale)
        expect(await store.claim({ ...stale, leaseToken: 'u' })).toMatchObject({ takeover: true })
        expect(await preparedStatements(connection)).toEqual([
          'idempotent_mutations_claim',
          'idempotent_mutations_complete',
          'idempotent_mutations_insert_or_read',
        ])
        // Each statement reached drizzle's logger once: insert or read twice, complete, insert
        // or read twice more, and the takeover's claim under the lock.
        expect(logged).toHaveLength(6)
        expect(new Set([logged[0], logged[1], logged[3], logged[4]]).size).toBe(1)
        expect(logged[2]).toMatch(/^update /)
        expect(logged[5]).toMatch(/^with "done" as/)
      }))

    it('transactional mode prepares its claim and completion on the transaction connection [postgres]', () =>
      withConnection(async (connection) => {
        const store = await tables.createStore(drizzleNodePg({ client: connection }))
        const idempotency = createIdempotency({ store, replayCache: false })
        const request = { key: 'k', operation: 'o', payload: {}, transactional: true } as const
        expect(await idempotency.execute(request, async () => 1)).toEqual({
          value: 1,
          replayed: false,
        })
        expect(await idempotency.execute(request, async () => 2)).toEqual({
          value: 1,
          replayed: true,
        })
        // The completion is the store's own statement.
        expect(await preparedStatements(connection)).toEqual([
          'idempotent_mutations_complete',
          'idempotent_mutations_tx_claim',
        ])
      }))

    it('two stores over two tables on one connection keep their statements apart [postgres]', () =>
      withConnection(async (connection) => {
        const db = drizzleNodePg({ client: connection })
        const first = await tables.createStore(db)
        const second = await tables.createStore(db)
        const claim = claimInput({ key: 'k', lockTimeoutMs: 1 })
        expect((await first.claim(claim)).claimed).toBe(true)
        expect((await second.claim(claim)).claimed).toBe(true)
        expect((await first.get('s', 'k'))?.leaseToken).toBe('t')
        expect((await second.get('s', 'k'))?.leaseToken).toBe('t')
      }))
  })
})
