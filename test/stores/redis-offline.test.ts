import { createIdempotency } from 'idempotent-mutations'
import { createRedisStore, RedisNotReadyError } from 'idempotent-mutations/redis'
import { Redis, type RedisOptions } from 'ioredis'
import { createClient } from 'redis'
import { createClient as createClientV4 } from 'redis4'
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import { claimInput, closedPort } from './redis-fixtures'

// No Redis server is needed here: every client points at a port nothing listens on. Clients
// retry only after an hour, so a call that waited in an offline queue would never settle and
// the test would time out instead of passing.
const anHour = 3_600_000
let port: number
const cleanup: (() => void)[] = []

beforeAll(async () => {
  port = await closedPort()
})
afterEach(() => {
  for (const close of cleanup.splice(0)) close()
})

function unreachableIoRedis(options: RedisOptions = {}): Redis {
  const client = new Redis({ host: '127.0.0.1', port, retryStrategy: () => anHour, ...options })
  client.on('error', () => {})
  cleanup.push(() => client.disconnect())
  return client
}

function unreachableNodeRedis(disableOfflineQueue: boolean) {
  const client = createClient({
    url: `redis://127.0.0.1:${port}`,
    disableOfflineQueue,
    socket: { reconnectStrategy: () => anHour },
  })
  client.on('error', () => {})
  // connect() settles only once connected (never, here) or destroyed.
  client.connect().catch(() => {})
  cleanup.push(() => client.destroy())
  return client
}

function unreachableNodeRedis4(disableOfflineQueue: boolean, legacyMode = false) {
  const client = createClientV4({
    url: `redis://127.0.0.1:${port}`,
    disableOfflineQueue,
    legacyMode,
    socket: { reconnectStrategy: () => anHour },
  })
  client.on('error', () => {})
  client.connect().catch(() => {})
  cleanup.push(() => {
    client.disconnect().catch(() => {})
  })
  return client
}

describe('Redis store without a reachable Redis', () => {
  it('refuses an ioredis call at once, without sending it, while the client is not ready', async () => {
    // Default ioredis settings: on its own, this client would queue the call for an hour.
    const client = unreachableIoRedis()
    const evalsha = vi.spyOn(client, 'evalsha')
    const store = createRedisStore(client)
    const error = await store.claim(claimInput()).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(RedisNotReadyError)
    expect(error).toMatchObject({ code: 'REDIS_NOT_READY' })
    expect(evalsha).not.toHaveBeenCalled()
  })

  it('refuses a node-redis call at once, without sending it, while the client is not ready', async () => {
    const client = unreachableNodeRedis(false)
    const evalSha = vi.spyOn(client, 'evalSha')
    const store = createRedisStore(client)
    await expect(store.claim(claimInput())).rejects.toMatchObject({ code: 'REDIS_NOT_READY' })
    expect(evalSha).not.toHaveBeenCalled()
  })

  it.each([
    ['node-redis 4', false],
    ['node-redis 4 in legacyMode', true],
  ])(
    'refuses a %s call at once, without sending it, while the client is not ready',
    async (_, legacyMode) => {
      const client = unreachableNodeRedis4(false, legacyMode)
      const commands = (legacyMode ? client.v4 : client) as { evalSha: () => unknown }
      const evalSha = vi.spyOn(commands, 'evalSha')
      const store = createRedisStore(client)
      await expect(store.claim(claimInput())).rejects.toMatchObject({ code: 'REDIS_NOT_READY' })
      expect(evalSha).not.toHaveBeenCalled()
    },
  )

  it('with requireReady off, fails fast through the recommended node-redis 4 settings', async () => {
    const client = unreachableNodeRedis4(true)
    const store = createRedisStore(client, { requireReady: false })
    await expect(store.claim(claimInput())).rejects.toThrow('The client is offline')
  })

  it('with requireReady off, fails fast through the recommended ioredis settings', async () => {
    const client = unreachableIoRedis({ enableOfflineQueue: false, maxRetriesPerRequest: 1 })
    const store = createRedisStore(client, { requireReady: false })
    await expect(store.claim(claimInput())).rejects.toThrow(/enableOfflineQueue/)
  })

  it('with requireReady off, fails fast through the recommended node-redis settings', async () => {
    const client = unreachableNodeRedis(true)
    const store = createRedisStore(client, { requireReady: false })
    await expect(store.claim(claimInput())).rejects.toThrow('The client is offline')
  })

  it('makes the engine answer 503 STORE_UNAVAILABLE and not run the handler', async () => {
    const idempotency = createIdempotency({
      store: createRedisStore(unreachableIoRedis()),
      logger: { warn() {}, error() {} },
    })
    const handler = vi.fn(async () => 'ran')
    const error = await idempotency
      .execute({ key: 'k-1', operation: 'orders.create' }, handler)
      .catch((e: unknown) => e)
    expect(error).toMatchObject({ code: 'STORE_UNAVAILABLE', status: 503 })
    expect((error as Error).cause).toBeInstanceOf(RedisNotReadyError)
    expect(handler).not.toHaveBeenCalled()
  })

  it("runs the handler unprotected when the engine is set to 'fail-open'", async () => {
    const idempotency = createIdempotency({
      store: createRedisStore(unreachableNodeRedis(true)),
      onStoreError: 'fail-open',
      logger: { warn() {}, error() {} },
    })
    const handler = vi.fn(async () => 'ran')
    await expect(
      idempotency.execute({ key: 'k-1', operation: 'orders.create' }, handler),
    ).resolves.toEqual({ value: 'ran', replayed: false })
    expect(handler).toHaveBeenCalledTimes(1)
  })
})

describe('createRedisStore arguments', () => {
  it('rejects something that is neither an ioredis nor a node-redis client', () => {
    for (const notAClient of [undefined, null, {}, { get() {} }, 'redis://127.0.0.1:6379']) {
      expect(() => createRedisStore(notAClient as never)).toThrow(
        expect.objectContaining({ name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' }),
      )
    }
  })

  it("rejects node-redis 5's legacy() wrapper, whose callback commands would pass for node-redis, by its shape", () => {
    const legacy = createClient().legacy()
    // A bundler that renames classes must not let it through.
    const renamed = Object.setPrototypeOf({ ...legacy }, Object.getPrototypeOf(legacy))
    Object.defineProperty(renamed, 'constructor', { value: class Minified {} })
    for (const wrapper of [legacy, renamed]) {
      expect(() => createRedisStore(wrapper as never)).toThrow(
        expect.objectContaining({ name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' }),
      )
    }
  })

  it('rejects a prefix with braces, which would move the Redis Cluster hash tag', () => {
    const client = new Redis({ lazyConnect: true })
    for (const prefix of ['app{1}:', 'idem}', 7]) {
      expect(() => createRedisStore(client, { prefix: prefix as string })).toThrow(
        expect.objectContaining({ name: 'TypeError', code: 'ERR_INVALID_ARG_VALUE' }),
      )
    }
  })
})
