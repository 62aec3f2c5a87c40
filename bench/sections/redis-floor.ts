/**
 * Redis against its floor: the two commands a first execution cannot do without, sent raw on the
 * client ours uses (node-redis 5), `SET key marker NX PX ttl`, the same handler, then
 * `SET key response PX ttl`; and a replay's floor, one `GET`. The Redis section (./redis.ts)
 * runs these variants in its timed comparison, the floor twice under two names (an A/A control).
 *
 * The server's own time per call comes from `INFO commandstats`, read before and after a short
 * run of each call alone: deltas, as the server is shared and its counters are never reset here.
 * A script's time includes the commands it calls, which the server also counts on their own.
 */
import type { createClient } from 'redis'
import type { Library } from '../lib/build'
import { byName, pairedRatio, ratio, round, type Variant, type VariantStats } from '../lib/measure'
import { type Order, type OrderInput, orderInput } from './fixtures'

type NodeRedis = ReturnType<typeof createClient>

/**
 * `a ÷ b`: the median over the rounds of the quotient within one round; the quotient of the
 * run's means; and of the two medians of single operations (p50), which the slow tail of a busy
 * machine moves least.
 */
export interface Quotient {
  medianOfRounds: number
  ofMeans: number
  ofP50s: number
}

export interface ServerTime {
  /** What was sent, as the store or the floor sends it. */
  call: string
  /** The command commandstats counts it under (`evalsha`, `set`, `get`). */
  command: string
  /** Calls of `command` counted during the run (more than sent: someone else's too). */
  calls: number
  /** Server time per call, in µs (a script's includes the commands it calls). */
  usecPerCall: number
  /** Commands a script called, per call of it: `{ set: 1, pexpiretime: 1 }`. */
  inner: Record<string, number>
}

export interface RedisFloorResult {
  /** Ours with default settings (replay cache on), node-redis 5, ÷ the raw floor. */
  firstVsFloor: Quotient
  /** The same with `replayCache: false`. */
  firstCacheOffVsFloor: Quotient
  /** A/A control: the raw floor ÷ itself measured under another name. */
  control: Quotient
  /** Our store's claim and complete without the engine ÷ the raw floor. */
  storeVsFloor: Quotient
  /** Ours (replay cache off) ÷ our store alone: the engine's share. */
  oursVsStore: Quotient
  /** Ours replay ÷ each peer's, from the replay cache and in one round trip (cache off). */
  replays: Record<'Powertools' | 'node-idempotency', { cacheOn: Quotient; cacheOff: Quotient }>
  /** Ours replay in one round trip ÷ a raw `GET`. */
  replayCacheOffVsGet: Quotient
  serverTimes: ServerTime[]
}

export const floorNames = {
  first: 'raw floor (node-redis): first execution',
  again: 'raw floor, again (node-redis): first execution',
  replay: 'raw floor (node-redis): replay (GET)',
  store: 'our store alone, no engine (node-redis): first execution',
} as const

const ttlMs = 600_000

/**
 * The floor's variants on `client`, with its replay records written first by `seed`; and our
 * store's claim and complete called directly around the handler, without the engine, which
 * parts what ours costs over the floor into the store's share (its scripts, their arguments and
 * replies) and the engine's (key checks, fingerprint, lease, encoding the outcome).
 */
export function floorVariants(
  lib: Library,
  client: NodeRedis,
  prefix: string,
  handler: (input: OrderInput) => Promise<Order>,
  replayKeys: number,
): { seed: () => Promise<void>; variants: Variant[] } {
  const expiration = { type: 'PX', value: ttlMs } as const
  const first = (space: string) => async (i: number) => {
    const key = `${prefix}${space}:${i}`
    const claimed = await client.set(key, 'in_progress', { condition: 'NX', expiration })
    if (claimed === null) throw new Error(`bench: the floor's key ${key} was taken`)
    const value = await handler(orderInput)
    await client.set(key, JSON.stringify(value), { expiration })
    return value
  }
  const replayKey = (i: number) => `${prefix}floor-replay:${i % replayKeys}`
  const store = lib.redis.createRedisStore(client, { prefix: `${prefix}store-alone:` })
  const fingerprint = lib.core.fingerprint(orderInput)
  const storeAlone = async (i: number) => {
    const [key, leaseToken] = [`key-${i}`, `lease-token-${i}`]
    await store.claim({ scope: '', key, fingerprint, leaseToken, lockTimeoutMs: 60_000, ttlMs })
    const value = await handler(orderInput)
    const response = `{"json":{"ok":true,"value":${JSON.stringify(value)}}}`
    await store.complete({ scope: '', key, leaseToken, response, ttlMs })
    return value
  }
  return {
    seed: async () => {
      for (let i = 0; i < replayKeys; i++) {
        await client.set(replayKey(i), JSON.stringify(await handler(orderInput)), { expiration })
      }
    },
    variants: [
      { name: floorNames.first, op: first('floor') },
      { name: floorNames.again, op: first('floor-again') },
      {
        name: floorNames.replay,
        op: async (i: number) => JSON.parse((await client.get(replayKey(i))) ?? 'null'),
      },
      { name: floorNames.store, op: storeAlone },
    ],
  }
}

/** The quotients of the timed comparison, by the variant names redis.ts gives. */
export function floorQuotients(latency: VariantStats[]): Omit<RedisFloorResult, 'serverTimes'> {
  const quotient = (a: string, b: string): Quotient => {
    const [x, y] = [byName(latency, a), byName(latency, b)]
    return {
      medianOfRounds: pairedRatio(x, y),
      ofMeans: ratio(x.wallUsPerOp, y.wallUsPerOp),
      ofP50s: ratio(x.p50Ms, y.p50Ms),
    }
  }
  const ours = (client: string, path: string) => `idempotent-mutations (${client}): ${path}`
  const cached = ours('node-redis, replay cache on', 'replay')
  const powertools = '@aws-lambda-powertools/idempotency (node-redis): replay'
  const peer = '@node-idempotency/core (redis@4 (its adapter)): replay'
  return {
    firstVsFloor: quotient(
      ours('node-redis, replay cache on', 'first execution'),
      floorNames.first,
    ),
    firstCacheOffVsFloor: quotient(ours('node-redis', 'first execution'), floorNames.first),
    control: quotient(floorNames.again, floorNames.first),
    storeVsFloor: quotient(floorNames.store, floorNames.first),
    oursVsStore: quotient(ours('node-redis', 'first execution'), floorNames.store),
    // Each peer against ours on its own client, as the section's other comparisons.
    replays: {
      Powertools: {
        cacheOn: quotient(cached, powertools),
        cacheOff: quotient(ours('node-redis', 'replay'), powertools),
      },
      'node-idempotency': {
        cacheOn: quotient(cached, peer),
        cacheOff: quotient(ours('redis@4', 'replay'), peer),
      },
    },
    replayCacheOffVsGet: quotient(ours('node-redis', 'replay'), floorNames.replay),
  }
}

/**
 * Server time per call of each script our store sends (driven through the store itself) and of
 * the floor's commands, `count` calls of each in turn.
 */
export async function serverTimes(
  lib: Library,
  client: NodeRedis,
  prefix: string,
  count: number,
): Promise<ServerTime[]> {
  const store = lib.redis.createRedisStore(client, { prefix: `${prefix}server-time:` })
  const response = JSON.stringify({ json: { ok: true, value: { id: 'order-1', total: 199.5 } } })
  const claim = (i: number, leaseToken: string) =>
    store.claim({
      scope: '',
      key: `key-${i}`,
      fingerprint: 'fingerprint-of-the-payload-0123456789abcdefghijk',
      leaseToken,
      lockTimeoutMs: 60_000,
      ttlMs,
    })
  const expiration = { type: 'PX', value: ttlMs } as const
  const raw = (i: number) => `${prefix}server-time-raw:${i}`
  const runs: [string, string, (i: number) => Promise<unknown>][] = [
    ['claim script, free key', 'evalsha', (i) => claim(i, `token-${i}`)],
    [
      'complete script',
      'evalsha',
      (i) =>
        store.complete({ scope: '', key: `key-${i}`, leaseToken: `token-${i}`, response, ttlMs }),
    ],
    ['claim script, completed record (a replay)', 'evalsha', (i) => claim(i, `other-${i}`)],
    ['SET NX PX', 'set', (i) => client.set(raw(i), 'in_progress', { condition: 'NX', expiration })],
    ['SET PX', 'set', (i) => client.set(raw(i), response, { expiration })],
    ['GET', 'get', (i) => client.get(raw(i))],
  ]
  const times: ServerTime[] = []
  for (const [call, command, run] of runs) {
    const before = await commandStats(client)
    for (let i = 0; i < count; i++) await run(i)
    times.push(serverTime(call, command, before, await commandStats(client)))
  }
  return times
}

interface CommandStat {
  calls: number
  usec: number
}

/** `INFO commandstats` as `{ set: { calls, usec }, ... }`. */
async function commandStats(client: NodeRedis): Promise<Record<string, CommandStat>> {
  const stats: Record<string, CommandStat> = {}
  for (const line of (await client.info('commandstats')).split('\n')) {
    const match = /^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/.exec(line.trim())
    if (match) stats[match[1]!] = { calls: Number(match[2]), usec: Number(match[3]) }
  }
  return stats
}

function serverTime(
  call: string,
  command: string,
  before: Record<string, CommandStat>,
  after: Record<string, CommandStat>,
): ServerTime {
  const delta = (name: string) => ({
    calls: (after[name]?.calls ?? 0) - (before[name]?.calls ?? 0),
    usec: (after[name]?.usec ?? 0) - (before[name]?.usec ?? 0),
  })
  const own = delta(command)
  const inner: Record<string, number> = {}
  if (command === 'evalsha') {
    for (const name of Object.keys(after)) {
      const { calls } = delta(name)
      if (name !== command && name !== 'info' && calls > 0)
        inner[name] = round(calls / own.calls, 2)
    }
  }
  return { call, command, calls: own.calls, usecPerCall: round(own.usec / own.calls, 2), inner }
}
