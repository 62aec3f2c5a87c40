import { randomUUID } from 'node:crypto'
import type { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createMemoryStore, type IdempotencyStore } from '../../src'
import { defineIdempotencyTable } from '../../src/stores/drizzle'
import { createRedisStore } from '../../src/stores/redis'
import { connectIoRedis, deletePrefixed, uniquePrefix } from '../stores/redis-fixtures'
import { createTRPCEcho, createYogaEcho } from '../support/echo-servers'
import { redisUrl, testSchema } from '../support/env'
import { connectTwoServers, twoServersWhere } from '../support/two-servers'

/**
 * The three results of issue "Replays that never lie", on the wire, on every store: a result
 * holding a Buffer, one holding an Error, and a streamed tRPC mutation. Each retry gets the first
 * caller's bytes, and the mutation runs once.
 */

const schemaName = testSchema('im_test_fidelity')
const redisPrefix = uniquePrefix('fidelity')
const database = connectTwoServers()
let redis: Redis | undefined
let tables = 0

beforeAll(async () => {
  await database.execute(`drop schema if exists "${schemaName}" cascade`)
  if (redisUrl) redis = await connectIoRedis()
})
afterAll(async () => {
  await database.execute(`drop schema if exists "${schemaName}" cascade`)
  await database.close()
  if (redis) {
    await deletePrefixed(redis, redisPrefix)
    redis.disconnect()
  }
})

const stores: [string, () => Promise<IdempotencyStore>][] = [
  ['memory', async () => createMemoryStore()],
  [
    `Drizzle ${twoServersWhere}`,
    async () => {
      const [store] = database.stores(defineIdempotencyTable(`records_${++tables}`, schemaName))
      await store!.ensureTable()
      return store!
    },
  ],
]
if (redisUrl) {
  stores.push([
    'Redis [redis]',
    async () => createRedisStore(redis!, { prefix: `${redisPrefix}${randomUUID()}:` }),
  ])
}

/** A PDF's first bytes, with bytes that are not text. */
const pdf = () => ({ name: 'a.pdf', file: Buffer.from([0x25, 0x50, 0x44, 0x46, 0x00, 0xff]) })
/** A failure returned as data, as the issue reports it: `{"ok":false,"reason":{}}` on the wire. */
const declined = () => ({ ok: false, reason: new Error('declined') })

describe.each(stores)('replays that never lie, on the %s store', (_, createStore) => {
  it.each([false, true])(
    'tRPC replays a Buffer and an Error byte for byte (superjson: %s)',
    async (superjson) => {
      const app = createTRPCEcho({ superjson, store: await createStore() })
      for (const [key, output] of [
        ['k-buffer', pdf()],
        ['k-error', declined()],
      ] as const) {
        app.state.output = output
        const first = await app.call(key)
        const retry = await app.call(key)
        expect(first.status).toBe(200)
        expect(retry).toEqual({ ...first, replay: 'true' })
      }
      if (!superjson) {
        expect(JSON.parse((await app.call('k-error')).body).result.data).toEqual({
          ok: false,
          reason: {},
        })
      }
      expect(app.echo).toHaveBeenCalledTimes(2)
    },
  )

  it.each([false, true])(
    'tRPC replays a streamed mutation as the same stream (superjson: %s)',
    async (superjson) => {
      const app = createTRPCEcho({ superjson, store: await createStore() })
      app.state.output = [{ row: 1, file: pdf().file }, declined(), { row: 3, at: new Date(0) }]
      const executed = app.nextEvent('executed')
      const first = await app.callStream('k-rows')
      await executed
      expect(first.body).toContain('"row":3')
      const retry = await app.callStream('k-rows')
      expect(retry.body).toBe(first.body)
      expect(app.rows).toHaveBeenCalledTimes(1)
    },
  )

  it('Yoga replays a Buffer and an Error byte for byte', async () => {
    const app = createYogaEcho({ store: await createStore() })
    for (const [key, output] of [
      ['k-buffer', pdf()],
      ['k-error', declined()],
    ] as const) {
      app.state.output = output
      const first = await app.call(key)
      const retry = await app.call(key)
      expect(first.status).toBe(200)
      expect(retry).toEqual({ ...first, replay: 'true' })
    }
    expect(JSON.parse((await app.call('k-error')).body).data.echo).toEqual({
      ok: false,
      reason: {},
    })
    expect(app.echo).toHaveBeenCalledTimes(2)
  })
})
