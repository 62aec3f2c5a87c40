/**
 * Under load: 64 clients at once against a tRPC and a Yoga server in a process of their own
 * (../load/server.ts), PostgreSQL behind them with a pool of 20, and Redis when REDIS_URL is set.
 * Each variant sends bursts of keyed requests from 64 keep-alive connections; the variants take
 * turns, round by round, in a shuffled order (../lib/measure.ts), so drift lands on all alike.
 * The floor is the hand-written SQL of ./floor.ts (and its Redis twin); "again" is the floor
 * under a second name, the A/A control of the run.
 */
import { type ChildProcess, fork } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { Agent, request } from 'node:http'
import { join } from 'node:path'
import type { BuiltLibrary } from '../lib/build'
import {
  type Budget,
  byName,
  compare,
  medianOf,
  ratio,
  round,
  type VariantStats,
} from '../lib/measure'
import type { FromServer, ToServer } from '../load/server'

export interface LoadResult {
  clients: number
  poolSize: number
  variants: VariantStats[]
  /** Per request: statements and round trips to PostgreSQL, commands to Redis. */
  perRequest: Record<string, { statements: number; roundTrips: number; redisCommands: number }>
  /** Ours ÷ the floor per server, and the A/A control. */
  ratios: Record<string, LoadRatios>
  control: LoadRatios
  /**
   * tRPC on PostgreSQL against the floor on a table of the SPEC's record (its eight columns, the
   * `expires_at` index, the store's parameters): that floor ÷ the floor, and ours ÷ that floor.
   * The first is what writing the record costs any library; the second, the rest of ours.
   */
  specRecord: { vsFloor: LoadRatios; oursVsIt: LoadRatios }
}

export interface LoadRatios {
  /** Throughput ÷ the floor's: of the whole run, and the median of the rounds' quotients. */
  throughput: number
  throughputMedianOfRounds: number
  /** p99 latency ÷ the floor's. */
  p99: number
  /** The server process's CPU per request ÷ the floor's (the whole run). */
  serverCpu: number
  /** Replays' throughput ÷ the floor's replays'. */
  replayThroughput?: number
  replayP99?: number
  /** With the replay cache off: every replay read from the store. */
  storeReplayThroughput?: number
}

export const loadClients = 64
const replayKeys = 256

export async function benchLoad(
  lib: BuiltLibrary,
  databaseUrl: string,
  redisUrl: string | undefined,
  budget: Budget,
): Promise<LoadResult> {
  const server = await startServer(lib, databaseUrl, redisUrl)
  const agent = new Agent({ keepAlive: true, maxSockets: loadClients })
  try {
    const { ready } = server
    const post = (url: string, body: string, key: string) => send(agent, url, body, key)
    const order = JSON.stringify({ item: 'standing desk', quantity: 2 })
    const gql = (field: string) =>
      JSON.stringify({
        query: `mutation { ${field}(item: "standing desk", quantity: 2) { id item quantity } }`,
      })
    const trpc = (procedure: string) => (key: string) =>
      post(`${ready.trpc}/${procedure}`, order, key)
    const yoga = (url: string, field: string) => (key: string) => post(url, gql(field), key)
    const servers: Record<string, Record<string, (key: string) => Promise<Reply>>> = {
      tRPC: {
        floor: trpc('floor'),
        ours: trpc('ours'),
        'ours, cache off': trpc('storeRead'),
        'floor on the SPEC record': trpc('specFloor'),
      },
      Yoga: {
        floor: yoga(ready.yogaFloor, 'createOrderFloor'),
        ours: yoga(ready.yoga, 'createOrder'),
      },
      ...(ready.redis
        ? { 'tRPC on Redis': { floor: trpc('redisFloor'), ours: trpc('redisOurs') } }
        : {}),
    }
    const requests: Record<string, (i: number) => Promise<Reply>> = {}
    for (const [name, routes] of Object.entries(servers)) {
      const tag = name.replace(/\W+/g, '-')
      requests[`${name} floor: first execution`] = (i) => routes.floor!(`${tag}-floor-${i}`)
      if (name === 'tRPC') {
        requests[`${name} floor: first execution, again`] = (i) =>
          routes.floor!(`${tag}-again-${i}`)
        requests[`${name} floor on the SPEC record: first execution`] = (i) =>
          routes['floor on the SPEC record']!(`${tag}-spec-${i}`)
      }
      requests[`${name} ours: first execution`] = (i) => routes.ours!(`${tag}-ours-${i}`)
      requests[`${name} floor: replay`] = (i) => routes.floor!(`${tag}-floor-r${i % replayKeys}`)
      requests[`${name} ours: replay`] = (i) => routes.ours!(`${tag}-ours-r${i % replayKeys}`)
      if (routes['ours, cache off']) {
        requests[`${name} ours: replay, cache off`] = (i) =>
          routes['ours, cache off']!(`${tag}-store-r${i % replayKeys}`)
      }
    }
    // A control for the replays: the same procedure shape answered at once, with no I/O.
    requests['tRPC, no I/O: a constant answer'] = (i) => trpc('constant')(`constant-${i}`)
    await recordReplays(requests)
    const perRequest = await countPerRequest(requests, server)
    const variants = await compare(
      Object.entries(requests).map(([name, op]) => ({ name, op })),
      {
        ...budget,
        concurrency: loadClients,
        latencies: true,
        otherCpuUs: async () => (await server.stats()).cpuUs,
        ...(existsSync(`/proc/self/task/${process.pid}/status`) ? { wakeups: ownWakeups } : {}),
      },
    )
    const ratios: Record<string, LoadRatios> = {}
    for (const name of Object.keys(servers)) ratios[name] = ratiosOf(variants, name)
    return {
      clients: loadClients,
      poolSize: 20,
      variants,
      perRequest,
      ratios,
      control: versus(
        variants,
        'tRPC floor: first execution, again',
        'tRPC floor: first execution',
      ),
      specRecord: {
        vsFloor: versus(
          variants,
          'tRPC floor on the SPEC record: first execution',
          'tRPC floor: first execution',
        ),
        oursVsIt: versus(
          variants,
          'tRPC ours: first execution',
          'tRPC floor on the SPEC record: first execution',
        ),
      },
    }
  } finally {
    agent.destroy()
    await server.stop()
  }
}

function ratiosOf(variants: VariantStats[], server: string): LoadRatios {
  const of = (a: string, b: string) => versus(variants, `${server} ${a}`, `${server} ${b}`)
  const first = of('ours: first execution', 'floor: first execution')
  const replay = of('ours: replay', 'floor: replay')
  const storeRead = variants.some((v) => v.name === `${server} ours: replay, cache off`)
    ? of('ours: replay, cache off', 'floor: replay')
    : undefined
  return {
    ...first,
    replayThroughput: replay.throughput,
    replayP99: replay.p99,
    ...(storeRead ? { storeReplayThroughput: storeRead.throughput } : {}),
  }
}

/** `a` against `b`: throughput and p99 quotients. */
function versus(variants: VariantStats[], a: string, b: string): LoadRatios {
  const ours = byName(variants, a)
  const floor = byName(variants, b)
  // Per round, the floor's time per burst ÷ ours is ours' throughput ÷ the floor's.
  const rounds = Math.min(ours.roundWallUs.length, floor.roundWallUs.length)
  const quotients = Array.from(
    { length: rounds },
    (_, i) => floor.roundWallUs[i]! / ours.roundWallUs[i]!,
  )
  return {
    throughput: ratio(ours.opsPerSecond, floor.opsPerSecond),
    throughputMedianOfRounds: round(medianOf(quotients), 2),
    p99: ratio(ours.p99Ms, floor.p99Ms),
    serverCpu: ratio(ours.otherCpuUsPerOp, floor.otherCpuUsPerOp),
  }
}

/** Records every replayed key, and checks that the library's replays are replays. */
async function recordReplays(requests: Record<string, (i: number) => Promise<Reply>>) {
  const replaying = Object.entries(requests).filter(([name]) => name.includes('replay'))
  for (let i = 0; i < replayKeys; i++) {
    await Promise.all(replaying.map(([, replay]) => replay(i)))
  }
  for (const [name, replay] of replaying) {
    const reply = await replay(0)
    if (name.includes('ours') && reply.replayed !== 'true') {
      throw new Error(`bench: ${name} did not answer as a replay`)
    }
  }
}

/** Statements, round trips and Redis commands per request of each kind, one request at a time. */
async function countPerRequest(
  requests: Record<string, (i: number) => Promise<Reply>>,
  server: Server,
): Promise<LoadResult['perRequest']> {
  const counts: LoadResult['perRequest'] = {}
  const times = 20
  for (const [name, send] of Object.entries(requests)) {
    // A warm-up pass first: the first use of a statement on a connection prepares it.
    for (let i = 0; i < times; i++) await send(10_000_000 + i)
    const before = await server.stats()
    for (let i = 0; i < times; i++) await send(10_000_100 + i)
    const after = await server.stats()
    const per = (field: 'statements' | 'roundTrips' | 'redisCommands') =>
      round((after[field] - before[field]) / times, 2)
    counts[name] = {
      statements: per('statements'),
      roundTrips: per('roundTrips'),
      redisCommands: per('redisCommands'),
    }
  }
  return counts
}

/**
 * The load generator's voluntary context switches so far, on its main thread (the event loop
 * that reads the answers; the garbage collector's helper threads are left out): each is a sleep
 * in which it had nothing to read, ended by a server's answer. A server that answers every
 * request at once, without waiting on anything, wakes it about once per answer; one that waits
 * on its database answers in bursts, and a burst wakes it once. Read from /proc (Linux).
 */
function ownWakeups(): number {
  const status = readFileSync(`/proc/self/task/${process.pid}/status`, 'utf8')
  return Number(/^voluntary_ctxt_switches:\s*(\d+)/m.exec(status)?.[1] ?? 0)
}

interface Reply {
  replayed: string | undefined
}

function send(agent: Agent, url: string, body: string, key: string): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        agent,
        headers: {
          'content-type': 'application/json',
          accept: 'application/json',
          'content-length': Buffer.byteLength(body),
          'idempotency-key': key,
        },
      },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (chunk: Buffer) => chunks.push(chunk))
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString()
          if (res.statusCode !== 200 || text.includes('"errors"')) {
            reject(new Error(`bench: ${url} answered ${res.statusCode}: ${text.slice(0, 300)}`))
          } else {
            resolve({ replayed: res.headers['idempotent-replay'] as string | undefined })
          }
        })
        res.on('error', reject)
      },
    )
    req.on('error', reject)
    req.end(body)
  })
}

interface Server {
  ready: Extract<FromServer, { type: 'ready' }>
  stats(): Promise<Extract<FromServer, { type: 'stats' }>>
  stop(): Promise<void>
}

/** Starts ../load/server.ts and resolves once it said where it listens. */
async function startServer(
  lib: BuiltLibrary,
  databaseUrl: string,
  redisUrl: string | undefined,
): Promise<Server> {
  const child: ChildProcess = fork(join(import.meta.dirname, '..', 'load', 'server.ts'), [], {
    execArgv: ['--import', 'tsx'],
    env: {
      ...process.env,
      BENCH_BUILD: lib.directory,
      DATABASE_URL: databaseUrl,
      REDIS_URL: redisUrl ?? '',
    },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  const exited = new Promise<never>((_, reject) =>
    child.once('exit', (code) => reject(new Error(`bench: the load server exited (${code})`))),
  )
  exited.catch(() => {})
  const next = <K extends FromServer['type']>(type: K) =>
    Promise.race([
      new Promise<Extract<FromServer, { type: K }>>((resolve) => {
        const listen = (message: FromServer) => {
          if (message.type !== type) return
          child.off('message', listen)
          resolve(message as Extract<FromServer, { type: K }>)
        }
        child.on('message', listen)
      }),
      exited,
    ])
  const ready = await next('ready')
  return {
    ready,
    stats: () => {
      const answer = next('stats')
      child.send({ type: 'stats' } satisfies ToServer)
      return answer
    },
    stop: async () => {
      const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()))
      child.disconnect()
      await gone
    },
  }
}
