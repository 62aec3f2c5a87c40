/**
 * The Drizzle store on one backend (PGlite, PostgreSQL through postgres.js, MariaDB through
 * mysql2, SQLite through libSQL or better-sqlite3): latency and
 * SQL statements of a first execution (claim + complete) and of a replay, throughput with 1, 16
 * and 64 distinct keys in flight, and a storm of callers on one key.
 */
import type { Library } from '../lib/build'
import type { Database } from '../lib/database'
import { type Budget, compare, round, type VariantStats } from '../lib/measure'
import { errorKind, type StormResult, storm } from '../lib/storm'
import { orderInput } from './fixtures'

export interface DrizzleBudgets {
  latency: Budget
  throughput: Budget
  concurrency: number[]
  stormCallers: number
  /** Callers of the storm whose duplicates wait (`concurrency: 'wait'`) and then replay. */
  waitStormCallers: number
  /** How long the storm's handler works, in milliseconds. */
  stormWorkMs: number
}

export interface DrizzleResult {
  backend: string
  poolSize: number
  settings: Record<string, string>
  latency: VariantStats[]
  /**
   * SQL statements sent per operation, counted by a drizzle logger: `replay` with the replay
   * cache off, `cachedReplay` with it on (the default) for keys this process recorded.
   */
  statementsPerOp: { firstExecution: number; replay: number; cachedReplay: number }
  throughput: { keysInFlight: number; opsPerSecond: number; p50Ms?: number; p99Ms?: number }[]
  storms: { concurrency: 'reject' | 'wait'; result: StormResult }[]
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

export async function benchDrizzle(
  lib: Library,
  database: Database,
  budgets: DrizzleBudgets,
): Promise<DrizzleResult> {
  const store = lib.drizzle.createDrizzleStore(
    database.db as never,
    database.table(lib.drizzle, 'records') as never,
  ) as { ensureTable(): Promise<void> } & Parameters<typeof lib.core.createIdempotency>[0]['store']
  await store.ensureTable()
  const idempotency = lib.core.createIdempotency({ store })
  // What the store itself costs: every retry read from the store, not the replay cache.
  const storeRead = lib.core.createIdempotency({ store, replayCache: false })
  const handler = async () => ({ id: 'order-1', item: orderInput.item, total: 199.5 })
  const run = (key: string, engine = storeRead) =>
    engine.execute({ key, operation: 'orders.create', payload: orderInput }, handler)

  const replayKeys = 200
  // Recorded through the default engine, which keeps its copies: its retries of these keys are
  // answered from the replay cache; `storeRead` reads the store for them every time.
  for (let i = 0; i < replayKeys; i++) await run(`replay-${i}`, idempotency)

  // Statements per operation, counted on their own before timing starts.
  const statementsOf = async (op: () => Promise<unknown>, times: number) => {
    const before = database.statements.count
    for (let i = 0; i < times; i++) await op()
    return round((database.statements.count - before) / times, 2)
  }
  let counted = 0
  const statementsPerOp = {
    firstExecution: await statementsOf(() => run(`count-${counted++}`), 50),
    replay: await statementsOf(() => run(`replay-${counted++ % replayKeys}`), 50),
    cachedReplay: await statementsOf(
      () => run(`replay-${counted++ % replayKeys}`, idempotency),
      50,
    ),
  }

  const latency = await compare(
    [
      { name: 'one round trip (select 1)', op: () => database.query('select 1') },
      { name: 'first execution (claim + complete)', op: (i) => run(`first-${i}`, idempotency) },
      { name: 'replay', op: (i) => run(`replay-${i % replayKeys}`) },
      {
        name: 'replay from the replay cache',
        op: (i) => run(`replay-${i % replayKeys}`, idempotency),
      },
    ],
    { ...budgets.latency, latencies: true },
  )

  const throughput: DrizzleResult['throughput'] = []
  for (const keysInFlight of budgets.concurrency) {
    const [stats] = await compare(
      [{ name: `${keysInFlight} keys`, op: (i) => run(`throughput-${keysInFlight}-${i}`) }],
      { ...budgets.throughput, concurrency: keysInFlight, latencies: true },
    )
    throughput.push({
      keysInFlight,
      opsPerSecond: stats!.opsPerSecond,
      p50Ms: stats!.p50Ms,
      p99Ms: stats!.p99Ms,
    })
  }

  const storms: DrizzleResult['storms'] = []
  for (const concurrency of ['reject', 'wait'] as const) {
    let executions = 0
    const key = `storm-${concurrency}`
    const result = await storm({
      callers: concurrency === 'wait' ? budgets.waitStormCallers : budgets.stormCallers,
      executions: () => executions,
      classify: errorKind,
      call: () =>
        idempotency.execute(
          { key, operation: 'orders.create', payload: orderInput, concurrency },
          async () => {
            executions++
            await sleep(budgets.stormWorkMs)
            return { id: 'order-storm' }
          },
        ),
    })
    storms.push({ concurrency, result })
  }

  return {
    backend: database.backend,
    poolSize: database.poolSize,
    settings: database.settings,
    latency,
    statementsPerOp,
    throughput,
    storms,
  }
}
