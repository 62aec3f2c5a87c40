import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { databaseUrl } from '../support/env'
import {
  createFleet,
  type Fault,
  type Figures,
  type Fleet,
  judge,
  reportChaos,
  runSchedule,
  startClients,
} from './fixtures/chaos'
import { type ChildConfig, killChildren } from './fixtures/children'
import { connect, createStore, type Database, resetSchema } from './fixtures/database'
import { createHttpClient } from './fixtures/http'
import { type OwnPostgres, ownPostgresMissing, startOwnPostgres } from './fixtures/own-postgres'
import { type OwnRedis, ownRedisMissing, startOwnRedis } from './fixtures/own-redis'
import { startProxy, type TcpProxy } from './fixtures/proxy'

/*
 * The fault suite (issue 26): app servers in child processes (tRPC and Yoga on one node http
 * server each) behind which a TCP proxy resets, delays and black-holes the connections to a
 * PostgreSQL and a Redis of the suite's own, which are crash-stopped and restarted, while the
 * servers themselves are SIGKILLed mid-request. N clients pay, each retrying a key until a
 * definitive answer; the invariants are read from the database at the end.
 *
 * `npm test` runs it short: 2 s of faults per scenario (each fault at least once), 16 clients,
 * when DATABASE_URL is set, as with the other real-service suites. `npm run chaos` runs it long:
 * 60 s per scenario, 32 clients. CHAOS_SECONDS and CHAOS_CLIENTS override either.
 */
const long = process.env.npm_lifecycle_event === 'chaos'
const seconds = Number(process.env.CHAOS_SECONDS || (long ? 60 : 2))
const clients = Number(process.env.CHAOS_CLIENTS || (long ? 32 : 16))
/** The lease: a key whose executor was killed comes back to the clients after it. */
const lockTimeout = 2000
const timeout = seconds * 1000 + 120_000

const missing =
  ownPostgresMissing ??
  (long || databaseUrl
    ? undefined
    : 'DATABASE_URL is not set (the short run goes with the real-service suites)')
const redisMissing = ownRedisMissing

describe.skipIf(missing !== undefined)(
  `the fault suite: ${clients} clients retrying keyed payments through proxy resets, latency, black holes, database crash-stops and app kills [postgres]${missing ? ` (skipped: ${missing})` : ''}`,
  () => {
    const http = createHttpClient({ timeoutMs: 4000 })
    let pg: OwnPostgres
    let pgProxy: TcpProxy
    /** Straight to the own PostgreSQL, never through the proxy: set-up and the invariants. */
    let direct: Database
    let redis: OwnRedis | undefined
    let redisProxy: TcpProxy | undefined
    let fleet: Fleet | undefined
    let scenarios = 0

    beforeAll(async () => {
      pg = await startOwnPostgres()
      pgProxy = await startProxy(pg)
      direct = connect({ url: pg.url, max: 2 })
      if (!redisMissing) {
        redis = await startOwnRedis()
        redisProxy = await startProxy(redis)
      }
    }, 120_000)
    /** After each scenario (see `scenario`), however it ended. */
    const cleanUp = async () => {
      fleet?.stop()
      fleet = undefined
      await killChildren()
      for (const proxy of [pgProxy, redisProxy]) {
        proxy?.delay(0)
        proxy?.blackHole(false)
      }
    }
    afterAll(async () => {
      await cleanUp()
      http.close()
      await direct?.close().catch(() => {})
      await pgProxy?.close()
      await redisProxy?.close()
      await pg?.stop()
      await redis?.stop()
    })

    const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
    /** Held this long: shorter than the lease, and than the clients' 4 s per attempt. */
    const holdMs = long ? 1500 : 600
    const proxyFaults = (proxy: () => TcpProxy, what: string): Fault[] => [
      { name: `${what}-reset`, run: async () => proxy().reset() },
      {
        name: `${what}-latency`,
        run: async () => {
          proxy().delay(150)
          await pause(holdMs)
          proxy().delay(0)
        },
      },
      {
        name: `${what}-blackhole`,
        run: async () => {
          proxy().blackHole(true)
          await pause(holdMs)
          proxy().blackHole(false)
        },
      },
    ]
    const postgresCrash: Fault = {
      name: 'postgres-crash-stop',
      run: async () => {
        await pg.crash()
        await pause(300)
        await pg.start()
      },
    }
    /** A Redis restart shorter than the lease: down for 300 ms, then the time it takes to load. */
    const redisKill: Fault = {
      name: 'redis-kill-9',
      run: async () => {
        await redis!.kill()
        await pause(300)
        await redis!.start()
      },
    }
    const appKill: Fault = { name: 'app-sigkill', run: () => fleet!.killBusiest() }

    /**
     * Records in progress past their lease. Their client got its answer and will not retry, so
     * nothing finishes them; a later retry of the key would run it again.
     */
    async function stuckRecords(schema: string, table: string, onRedis: boolean) {
      if (!onRedis) {
        const [row] = await direct.query<{ count: string }>(
          `select count(*)::text as count from "${schema}"."${table}"
           where status = 'in_progress' and locked_until <= now()`,
        )
        return Number(row?.count ?? 0)
      }
      const admin = redis!.admin
      let stuck = 0
      const [serverSeconds = 0, micros = 0] = await admin.time()
      const now = Number(serverSeconds) * 1000 + Math.floor(Number(micros) / 1000)
      for (const name of await admin.keys(`${schema}:${table}:*`)) {
        const text = await admin.get(name)
        const header = JSON.parse(text?.split('\n')[0] ?? '{}') as {
          status?: string
          leaseEndsBeforeExpiryMs?: string | number
        }
        const expiresAt = Number(await admin.pexpiretime(name))
        const lockedUntil = expiresAt - Number(header.leaseEndsBeforeExpiryMs ?? 0)
        if (header.status === 'in_progress' && lockedUntil <= now) stuck++
      }
      return stuck
    }

    async function runScenario(
      name: string,
      setup: { children: Partial<ChildConfig>[]; faults: Fault[]; onRedis?: boolean },
    ): Promise<Figures & { details: string[] }> {
      const schema = `chaos_${++scenarios}`
      const table = 'keys'
      await resetSchema(direct, schema)
      // Created here once: two servers creating it at once could collide in the catalog.
      if (!setup.onRedis) await createStore(direct.db, schema, table)
      const base: ChildConfig = {
        url: pg.url,
        via: pgProxy,
        schema,
        table,
        concurrency: ['reject'],
        lockTimeout,
        max: 4,
        gated: false,
      }
      fleet = createFleet(setup.children.map((child) => ({ ...base, ...child })))
      const began = Date.now()
      await fleet.start()
      const startMs = Date.now() - began
      const driver = startClients({
        http,
        fleet,
        clients,
        prefix: schema,
        maxAttempts: 400,
        // Long enough for a lease to end after the faults, and a retry to take the key over.
        keyBudgetMs: lockTimeout * 2 + 20_000,
      })
      const faults = await runSchedule(setup.faults, seconds, long ? 1500 : 250, (fault) =>
        fleet?.during(fault),
      )
      await fleet.settled()
      const faultsEnded = Date.now()
      const logs = await driver.stop()
      const drainMs = Date.now() - faultsEnded
      // A record left in progress by a completion that failed may still be finished by its
      // server (a retry in the background): asked again, bounded, before the servers go.
      const settleBy = Date.now() + 2000
      let stuck = await stuckRecords(schema, table, setup.onRedis ?? false)
      while (stuck > 0 && Date.now() < settleBy) {
        await pause(200)
        stuck = await stuckRecords(schema, table, setup.onRedis ?? false)
      }
      const crashes = fleet.crashes()
      const startFailures = fleet.startFailures()
      const { eventsOf } = fleet
      fleet.stop()
      await killChildren()
      const rows = new Map<string, string[]>()
      for (const row of await direct.query<{ key: string; id: string }>(
        `select key, id::text as id from "${schema}".executions order by id`,
      )) {
        rows.set(row.key, [...(rows.get(row.key) ?? []), row.id])
      }
      const figures = judge({ logs, rows, crashes, stuck, startFailures, faults, eventsOf })
      reportChaos(name, figures, {
        startMs,
        faultsMs: faultsEnded - began - startMs,
        drainMs,
      })
      for (const detail of figures.details.slice(0, 10)) console.log(`[chaos]   ${detail}`)
      expect(figures.acknowledged, 'the run acknowledged payments').toBeGreaterThan(0)
      return figures
    }

    type Invariant = 'duplicates' | 'lostAcks' | 'mismatches' | 'crashes' | 'stuck'
    const sentences: Record<Invariant, string> = {
      duplicates: 'every key has at most one business row (no duplicate)',
      lostAcks: 'every acknowledged key has the business row it was answered with (no lost ack)',
      mismatches: 'every later answer for a key equals the first one (no mismatched replay)',
      crashes: 'no app process exits on its own (no uncaught exception or unhandled rejection)',
      stuck: 'no key is left in progress past its lease',
    }
    /** How an invariant is expected to fare on this code: it holds, or a known bug breaks it. */
    type Expectation = 'holds' | { fails: string } | { skip: string }

    /**
     * One scenario: it runs once (the faults, the clients, the reading of the database), prints
     * its `[chaos]` line, then each invariant is a test of its own, so a known bug marks the one
     * invariant it breaks. `fails`: it fails on every run on this code; `skip`: on some runs.
     */
    function scenario(
      name: string,
      setup: () => Parameters<typeof runScenario>[1],
      expected: Partial<Record<Invariant, Expectation>>,
    ) {
      describe(name, () => {
        let figures: (Figures & { details: string[] }) | undefined
        beforeAll(async () => {
          try {
            figures = await runScenario(name, setup())
          } finally {
            await cleanUp()
          }
        }, timeout)
        for (const [invariant, expectation] of Object.entries(expected) as [
          Invariant,
          Expectation,
        ][]) {
          const check = () => {
            if (!figures) throw new Error('the scenario did not run')
            expect(figures[invariant], figures.details.slice(0, 10).join('\n')).toBe(0)
          }
          if (expectation === 'holds') it(sentences[invariant], check)
          else if ('fails' in expectation) {
            it.fails(`${sentences[invariant]} (fails on this code: ${expectation.fails})`, check)
          } else
            it.skip(`${sentences[invariant]} (skipped on this code: ${expectation.skip})`, check)
        }
      })
    }

    const drizzleServers: Partial<ChildConfig>[] = [
      { driver: 'postgres.js' },
      { driver: 'node-postgres' },
    ]
    // The kill comes first: its replacement starts while the other faults run.
    const postgresFaults = () => [appKill, ...proxyFaults(() => pgProxy, 'postgres'), postgresCrash]
    /** Measured and printed; not yet asserted (see the reason). */
    const noBackgroundCompletion =
      'a completion retried in the background through an outage can still give up before the store is back, leaving the key in progress until a retry takes it over; measured in the [chaos] line'

    scenario(
      'transactional mode, Drizzle store on postgres.js and node-postgres',
      () => ({
        children: drizzleServers.map((child) => ({ ...child, engine: { transactional: true } })),
        faults: postgresFaults(),
      }),
      {
        duplicates: 'holds',
        lostAcks: 'holds',
        mismatches: 'holds',
        crashes: 'holds',
        stuck: 'holds',
      },
    )

    scenario(
      'plain mode (duplicates measured), Drizzle store on postgres.js and node-postgres',
      () => ({
        children: drizzleServers.map((child) => ({ ...child, engine: { claimTimeout: 2000 } })),
        faults: postgresFaults(),
      }),
      {
        lostAcks: 'holds',
        mismatches: 'holds',
        crashes: 'holds',
        stuck: { skip: noBackgroundCompletion },
      },
    )

    const redisServers = (): Partial<ChildConfig>[] =>
      (['ioredis', 'node-redis'] as const).map((client) => ({
        redis: { url: `redis://127.0.0.1:${redisProxy!.port}`, client },
        engine: { claimTimeout: 2000 },
      }))
    const onRedis = (name: string) =>
      `${name} [redis]${redisMissing ? ` (skipped: ${redisMissing})` : ''}`

    describe.skipIf(redisMissing !== undefined)('on a Redis store of its own', () => {
      scenario(
        onRedis('plain mode (duplicates measured), Redis store on ioredis and node-redis'),
        () => ({
          children: redisServers(),
          faults: [appKill, ...proxyFaults(() => redisProxy!, 'redis'), redisKill],
          onRedis: true,
        }),
        {
          lostAcks: 'holds',
          mismatches: 'holds',
          crashes: 'holds',
          stuck: { skip: noBackgroundCompletion },
        },
      )

      scenario(
        onRedis('plain mode, Redis store, Redis kill -9 and restart shorter than the lease'),
        () => ({ children: redisServers(), faults: [redisKill], onRedis: true }),
        {
          duplicates: 'holds',
          lostAcks: 'holds',
          mismatches: 'holds',
          crashes: 'holds',
          stuck: { skip: noBackgroundCompletion },
        },
      )
    })
  },
)
