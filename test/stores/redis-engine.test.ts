import { randomUUID } from 'node:crypto'
import { createIdempotency, type Idempotency, type IdempotencyStore } from 'idempotent-mutations'
import { createRedisStore } from 'idempotent-mutations/redis'
import type { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import {
  type AnyRedisClient,
  closeClient,
  connectIoRedis,
  connectIoRedis6,
  connectNodeRedis,
  connectNodeRedis4,
  connectNodeRedis6,
  deletePrefixed,
  noRedis,
  redisUrl,
  uniquePrefix,
} from './redis-fixtures'

const prefix = uniquePrefix('redis-engine')
const callers = 100
let clients: AnyRedisClient[] = []

beforeAll(async () => {
  if (!redisUrl) return
  // Eight connections, of every supported client major (ioredis 5 and 6, node-redis 4, 5 and 6), stand for eight app servers on one Redis.
  clients = await Promise.all([
    ...Array.from({ length: 2 }, () => connectIoRedis()),
    connectIoRedis6(),
    ...Array.from({ length: 2 }, () => connectNodeRedis()),
    connectNodeRedis4(),
    ...Array.from({ length: 2 }, () => connectNodeRedis6()),
  ])
})
afterAll(async () => {
  if (!clients.length) return
  await deletePrefixed(clients[0] as Redis, prefix)
  await Promise.all(clients.map(closeClient))
})

/**
 * One engine per connection. The handler is held until all `callers` first claims have come
 * back from Redis, so every duplicate meets the operation while it is in progress.
 */
function engines(concurrency: 'reject' | 'wait') {
  let open!: () => void
  const allClaimed = new Promise<void>((resolve) => {
    open = resolve
  })
  let claims = 0
  const countClaims = (store: IdempotencyStore): IdempotencyStore => ({
    ...store,
    async claim(input) {
      const result = await store.claim(input)
      if (++claims === callers) open()
      return result
    },
  })
  const list: Idempotency[] = clients.map((client) =>
    createIdempotency({
      store: countClaims(createRedisStore(client, { prefix })),
      concurrency,
      // Retries here read Redis; the replay cache in front of it has its own tests.
      replayCache: false,
    }),
  )
  return { list, allClaimed }
}

describe.skipIf(!redisUrl)(`[redis] engine on the Redis store${noRedis}`, () => {
  it('runs the handler once for 100 concurrent duplicates and answers the others 409', async () => {
    const { list, allClaimed } = engines('reject')
    const handler = vi.fn(async () => {
      await allClaimed
      return { orderId: randomUUID(), at: new Date() }
    })
    const request = { key: randomUUID(), operation: 'orders.create', payload: { sku: 'A-1' } }
    const results = await Promise.allSettled(
      Array.from({ length: callers }, (_, i) =>
        (list[i % list.length] as Idempotency).execute(request, handler),
      ),
    )
    expect(handler).toHaveBeenCalledTimes(1)
    const ran = results.filter((r) => r.status === 'fulfilled')
    const conflicts = results.filter((r) => r.status === 'rejected')
    expect(ran).toHaveLength(1)
    for (const conflict of conflicts) {
      expect(conflict.reason).toMatchObject({ code: 'IN_PROGRESS', status: 409 })
      expect(conflict.reason.retryAfter).toBeGreaterThanOrEqual(1)
    }

    const retry = await (list[3] as Idempotency).execute(request, handler)
    expect(retry.replayed).toBe(true)
    expect(retry.value).toEqual((ran[0] as PromiseFulfilledResult<{ value: unknown }>).value.value)
    expect(retry.value.at).toBeInstanceOf(Date)
    expect(handler).toHaveBeenCalledTimes(1)
  })

  it("gives 100 concurrent duplicates one result with concurrency 'wait'", async () => {
    const { list, allClaimed } = engines('wait')
    const handler = vi.fn(async () => {
      await allClaimed
      return { orderId: randomUUID() }
    })
    const request = { key: randomUUID(), operation: 'orders.create', payload: { sku: 'A-2' } }
    const results = await Promise.all(
      Array.from({ length: callers }, (_, i) =>
        (list[i % list.length] as Idempotency).execute(request, handler),
      ),
    )
    expect(handler).toHaveBeenCalledTimes(1)
    expect(results.filter((r) => !r.replayed)).toHaveLength(1)
    expect(new Set(results.map((r) => r.value.orderId)).size).toBe(1)
  })
})
