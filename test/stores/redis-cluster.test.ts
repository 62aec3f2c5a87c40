import { randomUUID } from 'node:crypto'
import { createIdempotency } from 'idempotent-mutations'
import { createRedisStore, type RedisStore } from 'idempotent-mutations/redis'
import { describeStoreConformance } from 'idempotent-mutations/testing'
import { Cluster } from 'ioredis'
import { createCluster } from 'redis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { redisUrl } from './redis-fixtures'
import { canStartRedis, type LocalRedisCluster, startRedisCluster } from './redis-servers'

// Runs where the real-Redis suites run (REDIS_URL set, as on CI) and the machine can start
// redis-server itself: the test makes a three-master cluster of its own on free ports.
const runs = redisUrl !== undefined && canStartRedis()
const reason = runs
  ? ''
  : ' (skipped: needs REDIS_URL and redis-server/redis-cli on this machine to start a cluster)'

describe.skipIf(!runs)(`[redis] Redis Cluster, three masters${reason}`, () => {
  let cluster: LocalRedisCluster
  const clients: { close(): Promise<unknown> | unknown }[] = []
  const connectIoRedisCluster = async () => {
    const client = new Cluster(
      cluster.ports.map((port) => ({ host: '127.0.0.1', port })),
      { lazyConnect: true, enableOfflineQueue: false, redisOptions: { maxRetriesPerRequest: 1 } },
    )
    client.on('error', () => {})
    await client.connect()
    clients.push({ close: () => client.disconnect() })
    return client
  }
  const connectNodeRedisCluster = async () => {
    const client = createCluster({
      rootNodes: cluster.ports.map((port) => ({ url: `redis://127.0.0.1:${port}` })),
    })
    client.on('error', () => {})
    await client.connect()
    clients.push({ close: () => client.destroy() })
    return client
  }

  beforeAll(async () => {
    cluster = await startRedisCluster(3)
  }, 60_000)
  afterAll(async () => {
    for (const client of clients) await client.close()
    await cluster?.stop()
  })

  describeStoreConformance({
    name: 'Redis Cluster via ioredis Cluster',
    createStore: async () => createRedisStore(await connectIoRedisCluster()),
    concurrency: 50,
    selfExpiring: true,
  })

  describeStoreConformance({
    name: 'Redis Cluster via node-redis createCluster',
    createStore: async () => createRedisStore(await connectNodeRedisCluster()),
    concurrency: 50,
    selfExpiring: true,
  })

  it.each([
    ['ioredis Cluster', () => connectIoRedisCluster()],
    ['node-redis createCluster', () => connectNodeRedisCluster()],
  ] as const)(
    'spreads records over the masters, each on the node its slot names (%s)',
    async (_, connect) => {
      const store: RedisStore = createRedisStore(await connect(), {
        prefix: `im-cluster-${randomUUID().slice(0, 8)}:`,
      })
      const idempotency = createIdempotency({ store, replayCache: false })
      const keys = Array.from({ length: 60 }, (_, i) => `order-${i}`)
      for (const key of keys) {
        await idempotency.execute(
          { key, operation: 'orders.create', payload: { key } },
          async () => key,
        )
      }
      // Every record is on exactly one master: the one its hash tag's slot belongs to. The
      // others answer MOVED (it is not theirs) rather than 0.
      const recordKeys = keys.map((key) =>
        store.recordKey(JSON.stringify(['', 'orders.create']), key),
      )
      const perNode = await Promise.all(
        cluster.nodes.map(async (node) => {
          let count = 0
          for (const recordKey of recordKeys) {
            const found = await node.exists(recordKey).catch((error: Error) => {
              if (error.message.startsWith('MOVED')) return 0
              throw error
            })
            count += found
          }
          return count
        }),
      )
      expect(perNode.reduce((sum, count) => sum + count, 0)).toBe(keys.length)
      expect(perNode.filter((count) => count > 0).length).toBeGreaterThan(1)
      // And every retry replays, through whichever node holds its record.
      for (const key of keys) {
        expect(
          await idempotency.execute(
            { key, operation: 'orders.create', payload: { key } },
            async () => 'again',
          ),
        ).toEqual({ value: key, replayed: true })
      }
    },
  )
})
