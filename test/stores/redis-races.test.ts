import { randomUUID } from 'node:crypto'
import { createRedisStore, type RedisStore } from 'idempotent-mutations/redis'
import type { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ClaimResult } from '../../src/store'
import {
  type AnyRedisClient,
  claimInput,
  closeClient,
  connectIoRedis,
  connectIoRedis6,
  connectNodeRedis,
  connectNodeRedis4,
  connectNodeRedis6,
  deletePrefixed,
  noRedis,
  redisUrl,
  serverTime,
  uniquePrefix,
} from './redis-fixtures'

const prefix = uniquePrefix('redis-races')
const callers = 150
let clients: AnyRedisClient[] = []
let stores: RedisStore[] = []
let admin: Redis

beforeAll(async () => {
  if (!redisUrl) return
  // Eight connections, of every supported client major (ioredis 5 and 6, node-redis 4, 5 and 6), stand for eight app servers: claims race
  // inside Redis, not in one client's queue.
  clients = await Promise.all([
    ...Array.from({ length: 2 }, () => connectIoRedis()),
    connectIoRedis6(),
    ...Array.from({ length: 2 }, () => connectNodeRedis()),
    connectNodeRedis4(),
    ...Array.from({ length: 2 }, () => connectNodeRedis6()),
  ])
  stores = clients.map((client) => createRedisStore(client, { prefix }))
  admin = clients[0] as Redis
})
afterAll(async () => {
  if (!clients.length) return
  await deletePrefixed(admin, prefix)
  await Promise.all(clients.map(closeClient))
})

const storeFor = (i: number) => stores[i % stores.length] as RedisStore

describe.skipIf(!redisUrl)(`[redis] races on the Redis store${noRedis}`, () => {
  it(`${callers} claimers of one key on eight connections: one wins, all others get its record`, async () => {
    const first = claimInput()
    const results = await Promise.all(
      Array.from({ length: callers }, (_, i) =>
        storeFor(i).claim({ ...first, leaseToken: randomUUID() }),
      ),
    )
    const winners = results.filter((result) => result.claimed)
    expect(winners).toHaveLength(1)
    const token = winners[0]?.record.leaseToken
    for (const result of results) expect(result.record.leaseToken).toBe(token)
    expect(await storeFor(5).get(first.scope, first.key)).toMatchObject({ leaseToken: token })
  })

  it(`${callers} claimers of an expired lease: one takes over, and the old executor is fenced off`, async () => {
    // A zero lease ends at the claim's own millisecond, so on the server clock it has expired
    // for every later claim: no waiting needed.
    const old = claimInput({ lockTimeoutMs: 0 })
    await storeFor(0).claim(old)
    const results = await Promise.all(
      Array.from({ length: callers }, (_, i) =>
        storeFor(i).claim({ ...old, leaseToken: randomUUID(), lockTimeoutMs: 60_000 }),
      ),
    )
    const winners = results.filter((result) => result.claimed)
    expect(winners).toHaveLength(1)
    expect(winners[0]).toMatchObject({ takeover: true })
    const current = winners[0]?.record
    for (const result of results) expect(result.record.leaseToken).toBe(current?.leaseToken)

    expect(await storeFor(1).complete({ ...old, response: 'late', ttlMs: 60_000 })).toBe(false)
    expect(await storeFor(2).release(old)).toBe(false)
    expect(await storeFor(3).get(old.scope, old.key)).toEqual(current)
  })

  it("the old executor's late completion racing the takeover claims leaves one consistent outcome", async () => {
    const old = claimInput({ lockTimeoutMs: 0 })
    await storeFor(0).claim(old)
    const [completedLate, ...results] = await Promise.all([
      storeFor(1).complete({ ...old, response: 'late', ttlMs: 60_000 }),
      ...Array.from({ length: callers }, (_, i) =>
        storeFor(i).claim({ ...old, leaseToken: randomUUID(), lockTimeoutMs: 60_000 }),
      ),
    ])
    const winners = (results as ClaimResult[]).filter((result) => result.claimed)
    const stored = await storeFor(2).get(old.scope, old.key)
    if (completedLate) {
      expect(winners).toHaveLength(0)
      expect(stored).toMatchObject({ status: 'completed', response: 'late' })
    } else {
      expect(winners).toHaveLength(1)
      expect(stored).toMatchObject({
        status: 'in_progress',
        leaseToken: winners[0]?.record.leaseToken,
      })
    }
  })

  it('a record past expiresAt is gone from Redis without a sweep, and sweep deletes nothing', async () => {
    const live = claimInput()
    await storeFor(1).claim(live)
    const first = claimInput()
    await storeFor(0).claim(first)
    expect(await storeFor(0).complete({ ...first, response: 'short-lived', ttlMs: 50 })).toBe(true)
    // The completion ran before this reading of the server clock, so it expires by `deadline`
    // (read the record instead, and a slow test run might find it already gone).
    const deadline = (await serverTime(admin)) + 50
    while ((await serverTime(admin)) <= deadline) {
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
    expect(await admin.exists(storeFor(0).recordKey(first.scope, first.key))).toBe(0)
    expect(await storeFor(0).get(first.scope, first.key)).toBeUndefined()
    expect(await storeFor(0).sweep()).toBe(0)
    expect(await storeFor(1).get(live.scope, live.key)).toMatchObject({ status: 'in_progress' })
    const fresh = await storeFor(2).claim({ ...first, leaseToken: randomUUID(), fingerprint: 'b' })
    expect(fresh).toMatchObject({ claimed: true, takeover: false })
  })
})
