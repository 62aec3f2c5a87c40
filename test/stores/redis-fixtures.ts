import { randomUUID } from 'node:crypto'
import { once } from 'node:events'
import { createServer } from 'node:net'
import { Redis } from 'ioredis'
import { Redis as RedisV6 } from 'ioredis6'
import { createClient } from 'redis'
import { createClient as createClientV4 } from 'redis4'
import { createClient as createClientV6 } from 'redis6'
import type { ClaimInput } from '../../src/store'
import { redisUrl } from '../support/env'

export { redisUrl }

/** Appended to a real-Redis suite's name: the visible reason when it is skipped. */
export const noRedis = redisUrl
  ? ''
  : ' (skipped: REDIS_URL is not set, this suite needs a real Redis)'

/** A prefix no other test file (or run) shares: records of parallel files never meet. */
export function uniquePrefix(file: string): string {
  return `idem-test:${file}:${randomUUID().slice(0, 8)}:`
}

/** The settings the README (Redis store) recommends for ioredis. */
const ioredisOptions = {
  lazyConnect: true,
  enableOfflineQueue: false,
  maxRetriesPerRequest: 1,
  commandTimeout: 2_000,
} as const

/** An ioredis 5 client with the settings the README (Redis store) recommends, connected. */
export async function connectIoRedis(url = redisUrl): Promise<Redis> {
  const client = new Redis(url ?? '', ioredisOptions)
  await client.connect()
  return client
}

/**
 * An ioredis 6 client (the `ioredis6` dev dependency is `ioredis@6` under another name), with
 * the same settings, connected.
 */
export async function connectIoRedis6(url = redisUrl): Promise<RedisV6> {
  const client = new RedisV6(url ?? '', ioredisOptions)
  await client.connect()
  return client
}

/** A node-redis v5 client with the settings the README (Redis store) recommends, connected. */
export async function connectNodeRedis(url = redisUrl, RESP: 2 | 3 = 2) {
  const client = createClient({
    url: url ?? '',
    RESP,
    disableOfflineQueue: true,
    commandOptions: { timeout: 2_000 },
  })
  client.on('error', () => {})
  await client.connect()
  return client
}

/**
 * A node-redis v4 client (the `redis4` dev dependency is `redis@4` under another name), as the
 * README's settings for it, connected. v4 has no per-command timeout option.
 */
export async function connectNodeRedis4(url = redisUrl) {
  const client = createClientV4({ url: url ?? '', disableOfflineQueue: true })
  client.on('error', () => {})
  await client.connect()
  return client
}

/**
 * A node-redis v6 client (the `redis6` dev dependency is `redis@6` under another name), with the
 * settings the README recommends, connected.
 */
export async function connectNodeRedis6(url = redisUrl) {
  const client = createClientV6({
    url: url ?? '',
    disableOfflineQueue: true,
    commandOptions: { timeout: 2_000 },
  })
  client.on('error', () => {})
  await client.connect()
  return client
}

export type NodeRedisClient =
  | Awaited<ReturnType<typeof connectNodeRedis>>
  | Awaited<ReturnType<typeof connectNodeRedis4>>
  | Awaited<ReturnType<typeof connectNodeRedis6>>

/** The supported clients, for `describe.each`. */
export const clientKinds = [
  {
    name: 'ioredis',
    library: 'ioredis',
    connect: (url = redisUrl) => connectIoRedis(url),
  },
  {
    name: 'ioredis 6',
    library: 'ioredis',
    connect: (url = redisUrl) => connectIoRedis6(url),
  },
  {
    name: 'node-redis',
    library: 'node-redis',
    connect: (url = redisUrl) => connectNodeRedis(url),
  },
  {
    name: 'node-redis on RESP3',
    library: 'node-redis',
    connect: (url = redisUrl) => connectNodeRedis(url, 3),
  },
  {
    name: 'node-redis 4',
    library: 'node-redis',
    connect: (url = redisUrl) => connectNodeRedis4(url),
  },
  {
    name: 'node-redis 6',
    library: 'node-redis',
    connect: (url = redisUrl) => connectNodeRedis6(url),
  },
] as const

/** Any client of the supported libraries and majors. */
export type AnyRedisClient = Redis | RedisV6 | NodeRedisClient

export async function closeClient(client: AnyRedisClient): Promise<void> {
  if (client instanceof Redis || client instanceof RedisV6) client.disconnect()
  else if ('destroy' in client) client.destroy()
  // node-redis 4 refuses to disconnect a client that is closed already.
  else if (client.isOpen) await client.disconnect()
}

/** Deletes the records a test file wrote under its own prefix, and nothing else. */
export async function deletePrefixed(admin: Redis, prefix: string): Promise<void> {
  let cursor = '0'
  do {
    const [next, keys] = await admin.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000)
    cursor = next
    if (keys.length) await admin.del(...keys)
  } while (cursor !== '0')
}

export async function keysWithPrefix(admin: Redis, prefix: string): Promise<string[]> {
  const found: string[] = []
  let cursor = '0'
  do {
    const [next, keys] = await admin.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000)
    cursor = next
    found.push(...keys)
  } while (cursor !== '0')
  return found.sort()
}

/** The Redis server's clock in epoch milliseconds. */
export async function serverTime(admin: Redis): Promise<number> {
  const [seconds, micros] = await admin.time()
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)
}

/** A TCP port nothing listens on (`port`, or any when 0): bound by us, then closed again. */
export async function closedPort(port = 0): Promise<number> {
  const server = createServer()
  server.listen(port, '127.0.0.1')
  await once(server, 'listening')
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('no TCP address')
  await new Promise((resolve) => server.close(resolve))
  return address.port
}

/** A claim input with a fresh token; override what the test is about. */
export function claimInput(overrides: Partial<ClaimInput> = {}): ClaimInput {
  return {
    scope: '["tenant-1","orders.create"]',
    key: `key-${randomUUID()}`,
    fingerprint: 'fp-1',
    leaseToken: randomUUID(),
    lockTimeoutMs: 60_000,
    ttlMs: 86_400_000,
    ...overrides,
  }
}
