/**
 * Redis, side by side on the same server: our Redis store (through node-redis 5, ioredis and
 * node-redis 4, the client node-idempotency's adapter brings, so each peer can be compared with
 * ours on its own client), Powertools' cache persistence layer (node-redis, as its docs show) and
 * @node-idempotency/core (its own Redis adapter). Round trips are counted by wrapping each
 * library's client calls: every wrapped call is one command, so one round trip.
 */
import { RedisStorageAdapter } from '@node-idempotency/storage-adapter-redis'
import { Redis } from 'ioredis'
import { createClient } from 'redis'
import { createClient as createClientV4 } from 'redis4'
import type { Library } from '../lib/build'
import { type Budget, compare, round, type VariantStats } from '../lib/measure'
import { type Counter, countCalls, nodeIdempotency, type Protected, powertools } from '../lib/peers'
import { errorKind, type StormResult, storm } from '../lib/storm'
import { type Order, type OrderInput, orderInput } from './fixtures'
import { floorQuotients, floorVariants, type RedisFloorResult, serverTimes } from './redis-floor'

export interface RedisBudgets {
  latency: Budget
  stormCallers: number
  /** How long the storm's handler works, in milliseconds. */
  stormWorkMs: number
  /** Calls of each script and command run alone to read the server's time per call. */
  serverTimeCalls: number
}

export interface RedisLibraryResult {
  library: string
  client: string
  /** Commands (= round trips) per operation. */
  roundTrips: { firstExecution: number; replay: number }
  storm: StormResult
}

export interface RedisResult {
  libraries: RedisLibraryResult[]
  latency: VariantStats[]
  /** Ours against the raw commands of a first execution and a replay, and server times. */
  floor: RedisFloorResult
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

interface Contender {
  library: string
  client: string
  counter: Counter
  /** Builds the protected call around `handler`; each call to `make` gets its own key space. */
  make: (handler: (input: OrderInput) => Promise<Order>) => Protected<OrderInput, Order>
}

export async function benchRedis(
  lib: Library,
  redisUrl: string,
  budgets: RedisBudgets,
): Promise<RedisResult> {
  const prefix = `im-bench:${process.pid}:`
  const nodeRedis = createClient({ url: redisUrl })
  nodeRedis.on('error', () => {})
  await nodeRedis.connect()
  const ioredis = new Redis(redisUrl, { lazyConnect: true })
  await ioredis.connect()
  const theirAdapter = new RedisStorageAdapter({ url: redisUrl })
  await theirAdapter.connect()
  // node-idempotency's own client library (redis@4), for our store too: the same client as that
  // peer, so the comparison with it is of the libraries, not of the clients.
  const nodeRedis4 = createClientV4({ url: redisUrl })
  nodeRedis4.on('error', () => {})
  await nodeRedis4.connect()

  // Each client is wrapped once, in place: every wrapped call is one command on the wire.
  const counters = {
    'node-redis': { count: 0 },
    ioredis: { count: 0 },
    'redis@4': { count: 0 },
    powertools: { count: 0 },
    nodeIdempotency: { count: 0 },
  }
  const clients = {
    'node-redis': countCalls(nodeRedis, ['evalSha', 'eval'], counters['node-redis']),
    ioredis: countCalls(ioredis, ['evalsha', 'eval'], counters.ioredis),
    'redis@4': countCalls(nodeRedis4, ['evalSha', 'eval'], counters['redis@4']),
  }
  const powertoolsClient = countCalls(
    {
      get: (name: string) => nodeRedis.get(name),
      set: (name: string, value: string, options: never) => nodeRedis.set(name, value, options),
      del: (keys: string[]) => nodeRedis.del(keys),
    },
    ['get', 'set', 'del'],
    counters.powertools,
  )
  const nodeIdempotencyStorage = countCalls(
    theirAdapter,
    ['setIfNotExists', 'set', 'get'],
    counters.nodeIdempotency,
  )

  let instance = 0
  // Replay cache off unless asked: the peers run without their local caches too, so every
  // replay goes to Redis and the round trips compare like for like. On: the default settings.
  const ours = (client: keyof typeof clients, replayCache = false): Contender => ({
    library: 'idempotent-mutations',
    client: replayCache ? `${client}, replay cache on` : client,
    counter: counters[client],
    make: (handler) => {
      const store = lib.redis.createRedisStore(clients[client], {
        prefix: `${prefix}ours-${++instance}:`,
      })
      const idempotency = lib.core.createIdempotency({
        store,
        ttl: '10m',
        ...(replayCache ? {} : { replayCache: false }),
      })
      return async ({ key, input }) =>
        (
          await idempotency.execute({ key, operation: 'orders.create', payload: input }, () =>
            handler(input),
          )
        ).value
    },
  })
  const contenders: Contender[] = [
    ours('node-redis', true),
    ours('node-redis'),
    ours('ioredis'),
    ours('redis@4'),
    {
      library: '@aws-lambda-powertools/idempotency',
      client: 'node-redis',
      counter: counters.powertools,
      make: (handler) =>
        powertools(
          {
            client: powertoolsClient,
            keyPrefix: `${prefix}powertools-${++instance}`,
            expiresAfterSeconds: 600,
          },
          handler,
        ),
    },
    {
      library: '@node-idempotency/core',
      client: 'redis@4 (its adapter)',
      counter: counters.nodeIdempotency,
      make: (handler) =>
        nodeIdempotency(
          {
            storage: nodeIdempotencyStorage,
            cacheKeyPrefix: `${prefix}node-idempotency-${++instance}`,
            cacheTTLMS: 600_000,
          },
          handler,
        ),
    },
  ]

  try {
    let orders = 0
    const handler = async (input: OrderInput): Promise<Order> => ({
      id: `order-${++orders}`,
      item: input.item,
      quantity: input.quantity,
      total: input.quantity * 99.75,
    })
    const replayKeys = 100
    const calls = contenders.map((contender) => contender.make(handler))
    for (const call of calls) {
      for (let i = 0; i < replayKeys; i++) await call({ key: `replay-${i}`, input: orderInput })
    }
    const floor = floorVariants(lib, nodeRedis, prefix, handler, replayKeys)
    await floor.seed()

    const roundTripsOf = async (contender: Contender, op: (i: number) => Promise<unknown>) => {
      const before = contender.counter.count
      const times = 50
      for (let i = 0; i < times; i++) await op(i)
      return round((contender.counter.count - before) / times, 2)
    }
    const roundTrips = []
    for (const [index, contender] of contenders.entries()) {
      const call = calls[index]!
      roundTrips.push({
        firstExecution: await roundTripsOf(contender, (i) =>
          call({ key: `count-${i}`, input: orderInput }),
        ),
        replay: await roundTripsOf(contender, (i) =>
          call({ key: `replay-${i % replayKeys}`, input: orderInput }),
        ),
      })
    }

    const name = (contender: Contender) => `${contender.library} (${contender.client})`
    const latency = await compare(
      [
        { name: 'one round trip (PING)', op: () => nodeRedis.ping() },
        ...contenders.flatMap((contender, index) => [
          {
            name: `${name(contender)}: first execution`,
            op: (i: number) => calls[index]!({ key: `first-${i}`, input: orderInput }),
          },
          {
            name: `${name(contender)}: replay`,
            op: (i: number) =>
              calls[index]!({ key: `replay-${i % replayKeys}`, input: orderInput }),
          },
        ]),
        ...floor.variants,
      ],
      { ...budgets.latency, latencies: true },
    )

    const libraries: RedisLibraryResult[] = []
    for (const [index, contender] of contenders.entries()) {
      let executions = 0
      const slow = contender.make(async (input) => {
        executions++
        await sleep(budgets.stormWorkMs)
        return handler(input)
      })
      const result = await storm({
        callers: budgets.stormCallers,
        executions: () => executions,
        classify: errorKind,
        call: () => slow({ key: 'storm', input: orderInput }),
      })
      libraries.push({
        library: contender.library,
        client: contender.client,
        roundTrips: roundTrips[index]!,
        storm: result,
      })
    }
    const floorResult = {
      ...floorQuotients(latency),
      serverTimes: await serverTimes(lib, nodeRedis, prefix, budgets.serverTimeCalls),
    }
    return { libraries, latency, floor: floorResult }
  } finally {
    await deleteKeys(nodeRedis, `${prefix}*`)
    await Promise.allSettled([
      nodeRedis.quit(),
      ioredis.quit(),
      theirAdapter.disconnect(),
      nodeRedis4.quit(),
    ])
  }
}

/** Deletes this run's keys (SCAN, never KEYS: other people's tests share the server). */
async function deleteKeys(client: ReturnType<typeof createClient>, pattern: string) {
  for await (const keys of client.scanIterator({ MATCH: pattern, COUNT: 1000 })) {
    if (keys.length > 0) await client.del(keys)
  }
}
