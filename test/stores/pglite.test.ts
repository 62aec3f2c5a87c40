import { randomUUID } from 'node:crypto'
import { PGlite } from '@electric-sql/pglite'
import { drizzle } from 'drizzle-orm/pglite'
import { describeStoreConformance } from 'idempotent-mutations/testing'
import { afterAll, describe, expect, it, vi } from 'vitest'
import { createIdempotency } from '../../src'
import { idempotencyKeys } from '../../src/stores/drizzle'
import { describeAcceptance } from '../core/acceptance'
import { describeDrizzleBehaviour } from './drizzle-behaviour'
import { EverythingCache, statementCounter, useTestTables } from './drizzle-fixtures'

// Everything that runs on PGlite shares this file's one instance: a new one takes seconds to
// start (much longer on a busy machine).
const client = new PGlite()
afterAll(() => client.close())
// A schema-typed database, as users write it: the store must accept it.
const db = drizzle({ client, schema: { idempotencyKeys } })
const counter = statementCounter()
const countedDb = drizzle({ client, logger: counter.logger })
const schema = 'im_test_pglite'
const tables = useTestTables(() => db, schema)

describeStoreConformance({
  name: 'drizzle on PGlite',
  createStore: () => tables.createStore(),
  concurrency: 100,
})

// The store's selects must never be answered from drizzle's cache: the claim has an INSERT in
// it, and the record changes through statements drizzle does not see (the session functions).
const cache = new EverythingCache()
describeStoreConformance({
  name: 'drizzle on PGlite behind a global query cache',
  createStore: () => tables.createStore(drizzle({ client, cache })),
  concurrency: 20,
})

// Without `$client` the store cannot tell the driver and sends every statement through drizzle's
// own query path, as it does for drivers it has no direct path for (neon-http, pg-proxy, ...).
describeStoreConformance({
  name: "drizzle on PGlite through drizzle's query path, behind a global query cache",
  createStore: () => {
    const generic = drizzle({ client, cache: new EverythingCache() })
    Reflect.deleteProperty(generic, '$client')
    return tables.createStore(generic)
  },
  concurrency: 20,
})

describeDrizzleBehaviour({
  name: 'PGlite',
  createCountedStore: () => tables.createStore(countedDb),
  counter,
  db: () => db,
})

describeAcceptance({
  name: 'drizzle on PGlite',
  db: () => db,
  schema,
  createStore: () => tables.createStore(),
  concurrency: 100,
})

describe('drizzle store: PGlite runs the claim and the completion as session functions', () => {
  const functions = async () =>
    (
      await client.query<{ proname: string }>(
        `select proname from pg_proc where pronamespace = pg_my_temp_schema() order by proname`,
      )
    ).rows.map((row) => row.proname)

  it('creates them in pg_temp on first use, and nothing in the schema', async () => {
    const store = await tables.createStore()
    const before = await functions()
    const idempotency = createIdempotency({ store, replayCache: false })
    const request = { key: randomUUID(), operation: 'orders.create', payload: { amount: 5 } }
    await idempotency.execute(request, () => ({ id: 1 }))
    expect(await idempotency.execute(request, () => ({ id: 2 }))).toEqual({
      value: { id: 1 },
      replayed: true,
    })
    // This store's own (its table's tag ends each name): the claim's first statement and the
    // completion; the claim under the lock is created only when a takeover needs it.
    const created = (await functions()).filter((name) => !before.includes(name))
    expect(created.map((name) => name.replace(/_[0-9a-f]{12}$/, ''))).toEqual([
      'idempotent_mutations_complete',
      'idempotent_mutations_insert_or_read',
    ])
    const inSchema = await client.query(
      `select 1 from pg_proc p join pg_namespace n on n.oid = p.pronamespace where n.nspname = $1`,
      [schema],
    )
    expect(inSchema.rows).toEqual([])
  })

  it('sends PGlite two calls per first execution and one per replay, after creating both functions once', async () => {
    const store = await tables.createStore()
    const idempotency = createIdempotency({ store, replayCache: false })
    const query = vi.spyOn(client, 'query')
    const exec = vi.spyOn(client, 'exec')
    try {
      const calls = async (run: () => Promise<unknown>) => {
        query.mockClear()
        exec.mockClear()
        await run()
        return { query: query.mock.calls.length, exec: exec.mock.calls.length }
      }
      const request = (key: string) => ({ key, operation: 'orders.create', payload: { n: 1 } })
      // The store's first claim and first completion create their functions.
      expect(await calls(() => idempotency.execute(request('a'), () => 1))).toEqual({
        query: 2,
        exec: 2,
      })
      expect(await calls(() => idempotency.execute(request('b'), () => 2))).toEqual({
        query: 2,
        exec: 0,
      })
      expect(await calls(() => idempotency.execute(request('b'), () => 3))).toEqual({
        query: 1,
        exec: 0,
      })
    } finally {
      query.mockRestore()
      exec.mockRestore()
    }
  })

  it('creates them again after DISCARD TEMP dropped them', async () => {
    const store = await tables.createStore()
    const idempotency = createIdempotency({ store, replayCache: false })
    const request = { key: randomUUID(), operation: 'orders.create', payload: { amount: 5 } }
    await idempotency.execute(request, () => ({ id: 1 }))
    await client.exec('discard temp')
    expect(await functions()).toEqual([])
    expect(await idempotency.execute(request, () => ({ id: 2 }))).toEqual({
      value: { id: 1 },
      replayed: true,
    })
    await client.exec('discard temp')
    const fresh = { ...request, key: randomUUID() }
    expect(await idempotency.execute(fresh, () => ({ id: 3 }))).toEqual({
      value: { id: 3 },
      replayed: false,
    })
    expect(await store.get(JSON.stringify(['', 'orders.create']), fresh.key)).toMatchObject({
      status: 'completed',
    })
  })
})
