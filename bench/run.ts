/**
 * `npm run bench`: measures idempotent-mutations against a direct call, the two peer libraries
 * and a hand-written SQL floor, and writes bench/results/latest.json and latest.md.
 *
 *   npm run bench                      engine, Drizzle store on PGlite, HTTP on PGlite
 *   DATABASE_URL=... REDIS_URL=... npm run bench
 *                                      + Drizzle store on PostgreSQL, Redis side by side,
 *                                        HTTP on PostgreSQL instead of PGlite
 *   MYSQL_URL=... npm run bench        + Drizzle store on MariaDB (SQLite through libSQL and
 *                                        better-sqlite3 runs always, on a file of its own)
 *   npm run bench -- --quick           a few operations of each, to check the script runs
 *                                      (prints, writes no results)
 *   npm run bench -- --only=engine,http   some sections only (engine, growth, telemetry, drizzle,
 *                                      redis, http, load)
 *   npm run bench -- --source          measure the TypeScript sources through tsx instead of
 *                                      the tsup build
 *
 * Every loop is bounded by a count and a time budget; servers listen on 127.0.0.1 only.
 */

import { type BuiltLibrary, buildLibrary, loadSources } from './lib/build'
import { type Database, openDatabase } from './lib/database'
import { type DialectName, dialectMissing, openDialect } from './lib/dialects'
import { finishRun } from './lib/finish'
import { describeMachine } from './lib/machine'
import { checkTargets, type Results, toMarkdown } from './lib/report'
import { growthLines } from './lib/report-growth'
import { loadLines } from './lib/report-load'
import { redisFloorLines } from './lib/report-redis'
import { checkLoopback } from './lib/urls'
import { benchDrizzle, type DrizzleBudgets } from './sections/drizzle'
import { benchEngine } from './sections/engine'
import { benchGrowth, type GrowthBudgets } from './sections/growth'
import { benchHttp } from './sections/http'
import { benchLoad, loadClients } from './sections/load'
import { benchRedis, type RedisBudgets } from './sections/redis'
import { benchTelemetry } from './sections/telemetry'

const sections = ['engine', 'growth', 'telemetry', 'drizzle', 'redis', 'http', 'load'] as const
type Section = (typeof sections)[number]

const args = process.argv.slice(2)
const quick = args.includes('--quick')
const fromSource = args.includes('--source')
const only = args
  .find((arg) => arg.startsWith('--only='))
  ?.slice('--only='.length)
  .split(',')
  .filter(Boolean)
for (const name of only ?? []) {
  if (!sections.includes(name as Section)) {
    throw new Error(`bench: unknown section ${name} (known: ${sections.join(', ')})`)
  }
}
const wanted = (section: Section) => only === undefined || only.includes(section)

const databaseUrl = process.env.DATABASE_URL || undefined
const redisUrl = process.env.REDIS_URL || undefined
const mysqlUrl = process.env.MYSQL_URL || undefined
// The bench opens servers and floods them: never anything but this machine.
checkLoopback('DATABASE_URL', databaseUrl)
checkLoopback('REDIS_URL', redisUrl)
checkLoopback('MYSQL_URL', mysqlUrl)

const budgets = quick
  ? {
      engine: { batch: 200, rounds: 2, maxMs: 2_000, warmupRounds: 1 },
      growth: {
        sizesKiB: [1, 16, 256, 1024],
        bytesPerRound: 1024 * 1024,
        rounds: 2,
        maxMs: 500,
        warmupRounds: 0,
        inFlight: [{ operations: 1_000, repeats: 1 }],
      } satisfies GrowthBudgets,
      telemetry: { batch: 200, rounds: 2, maxMs: 2_000, warmupRounds: 1 },
      drizzle: {
        latency: { batch: 10, rounds: 2, maxMs: 2_000 },
        throughput: { batch: 64, rounds: 1, minRounds: 1, maxMs: 2_000, warmupRounds: 0 },
        concurrency: [1, 16, 64],
        stormCallers: 50,
        waitStormCallers: 20,
        stormWorkMs: 20,
      } satisfies DrizzleBudgets,
      redis: {
        latency: { batch: 10, rounds: 2, maxMs: 2_000 },
        stormCallers: 20,
        stormWorkMs: 20,
        serverTimeCalls: 20,
      } satisfies RedisBudgets,
      http: { batch: 4, rounds: 2, maxMs: 2_000, warmupRounds: 1 },
      load: { batch: loadClients, rounds: 2, maxMs: 2_000, warmupRounds: 1 },
    }
  : {
      engine: { batch: 4_000, rounds: 12, maxMs: 20_000, warmupRounds: 2 },
      growth: {
        sizesKiB: [1, 16, 256, 1024],
        bytesPerRound: 2 * 1024 * 1024,
        rounds: 9,
        maxMs: 2_000,
        warmupRounds: 1,
        inFlight: [
          { operations: 1_000, repeats: 7 },
          { operations: 10_000, repeats: 3 },
        ],
      } satisfies GrowthBudgets,
      telemetry: { batch: 1_000, rounds: 40, maxMs: 15_000, warmupRounds: 2 },
      drizzle: {
        latency: { batch: 100, rounds: 10, maxMs: 8_000 },
        throughput: { batch: 192, rounds: 2, maxMs: 3_000, warmupRounds: 1 },
        concurrency: [1, 16, 64],
        stormCallers: 1_000,
        waitStormCallers: 200,
        stormWorkMs: 50,
      } satisfies DrizzleBudgets,
      redis: {
        // More, shorter rounds: the ratios against the peers are medians of within-round quotients.
        latency: { batch: 100, rounds: 20, maxMs: 15_000 },
        stormCallers: 200,
        stormWorkMs: 50,
        serverTimeCalls: 500,
      } satisfies RedisBudgets,
      http: { batch: 5, rounds: 300, maxMs: 75_000, warmupRounds: 4 },
      load: { batch: 8 * loadClients, rounds: 60, maxMs: 50_000, warmupRounds: 1 },
    }

const log = (line: string) => console.log(`[bench] ${line}`)

async function main(): Promise<void> {
  const startedAt = performance.now()
  const machine = describeMachine()
  log(
    `${machine.cpuModel}, ${machine.cores} cores, Node ${machine.node}, load average ${machine.loadAverageAtStart}`,
  )
  log(
    `backends: PGlite${databaseUrl ? ', PostgreSQL' : ' (DATABASE_URL not set: no PostgreSQL)'}${redisUrl ? ', Redis' : ' (REDIS_URL not set: no Redis)'}`,
  )
  const lib: BuiltLibrary = fromSource ? await loadSources() : await buildLibrary()
  log(fromSource ? 'measuring the sources through tsx' : 'measuring the tsup build')

  const results: Omit<Results, 'targets' | 'durationSeconds'> = {
    machine,
    mode: quick ? 'quick' : 'full',
    measured: fromSource ? 'source' : 'build',
    backends: {
      pglite: true,
      postgres: Boolean(databaseUrl),
      redis: Boolean(redisUrl),
      mariadb: Boolean(mysqlUrl),
    },
    drizzle: [],
  }
  try {
    if (wanted('engine')) {
      log('engine overhead, memory store vs Powertools vs @node-idempotency/core ...')
      results.engine = await benchEngine(lib, budgets.engine)
      const { ours, powertools, 'node-idempotency': peer } = results.engine.overheadUs
      log(
        `  CPU µs over a direct call, first execution / replay: ours ${ours!.first} / ${ours!.replay}, Powertools ${powertools!.first} / ${powertools!.replay}, node-idempotency ${peer!.first} / ${peer!.replay}`,
      )
    }
    if (wanted('growth')) {
      log('growth with the work: fingerprint and codec per KiB, memory per 1,000 in flight ...')
      results.growth = await benchGrowth(lib, budgets.growth)
      for (const line of growthLines(results.growth)) log(`  ${line}`)
    }
    if (wanted('telemetry')) {
      log('OpenTelemetry on the engine: off vs no SDK vs an SDK recording ...')
      results.telemetry = await benchTelemetry(lib, budgets.telemetry)
      const { overheadUs, ratios } = results.telemetry
      const pair = ({ first, replay }: { first: number; replay: number }) => `${first} / ${replay}`
      log(
        `  CPU µs over a direct call, first execution / replay: off ${pair(overheadUs['telemetry off'])}, no SDK ${pair(overheadUs['no SDK'])}, SDK ${pair(overheadUs.SDK)}`,
      )
      log(
        `  time ÷, first execution / replay (medians of rounds): no SDK ÷ off ${pair(ratios.noSdkVsOff)}, A/A control ${pair(ratios.control)}, SDK ÷ no SDK ${pair(ratios.sdkVsNoSdk)}`,
      )
    }
    if (wanted('drizzle')) {
      const backends = [
        'pglite',
        ...(databaseUrl ? ['postgres'] : []),
        'mariadb',
        'libsql',
        'better-sqlite3',
      ] as const
      for (const backend of backends as readonly Database['backend'][]) {
        const missing =
          backend === 'pglite' || backend === 'postgres'
            ? undefined
            : dialectMissing(backend as DialectName, mysqlUrl)
        if (missing) {
          log(`Drizzle store on ${backend}: skipped (${missing})`)
          continue
        }
        log(`Drizzle store on ${backend} ...`)
        const database =
          backend === 'pglite' || backend === 'postgres'
            ? await openDatabase(backend, databaseUrl)
            : await openDialect(backend as DialectName, mysqlUrl)
        try {
          const result = await benchDrizzle(lib, database, budgets.drizzle)
          results.drizzle.push(result)
          const [, first, replay] = result.latency
          log(
            `  p50 first execution ${first!.p50Ms} ms (${result.statementsPerOp.firstExecution} statements), replay ${replay!.p50Ms} ms (${result.statementsPerOp.replay}); ${result.throughput.map((t) => `${t.keysInFlight} keys ${t.opsPerSecond}/s`).join(', ')}`,
          )
          for (const { concurrency, result: s } of result.storms) {
            log(
              `  storm (${concurrency}): ${s.callers} callers, handler ran ${s.executions}×, all answered in ${s.allAnsweredMs} ms`,
            )
          }
        } finally {
          await database.close()
        }
      }
    }
    if (wanted('redis')) {
      if (redisUrl) {
        log('Redis: ours vs Powertools vs @node-idempotency/core ...')
        results.redis = await benchRedis(lib, redisUrl, budgets.redis)
        for (const l of results.redis.libraries) {
          log(
            `  ${l.library} (${l.client}): round trips ${l.roundTrips.firstExecution} first / ${l.roundTrips.replay} replay; storm of ${l.storm.callers}: handler ran ${l.storm.executions}×`,
          )
        }
        for (const line of redisFloorLines(results.redis.floor)) log(`  ${line}`)
      } else {
        log('Redis: skipped (REDIS_URL is not set)')
      }
    }
    if (wanted('http')) {
      const backend = databaseUrl ? 'postgres' : 'pglite'
      log(`end to end over HTTP on ${backend}: tRPC and Yoga, plain vs ours vs SQL floor ...`)
      const database = await openDatabase(backend, databaseUrl)
      try {
        results.http = await benchHttp(lib, database, budgets.http)
        for (const [adapter, r] of Object.entries(results.http.ratios)) {
          log(
            `  ${adapter}: first ÷ plain ${r.firstVsPlain}, replay ÷ plain ${r.replayVsPlain}, first ÷ floor ${r.firstVsFloor}, replay ÷ floor ${r.replayVsFloor}, replay (cache off) ÷ floor ${r.storeReplayVsFloor} (medians of rounds; ratios of means ${r.ofMeans.firstVsFloor}, ${r.ofMeans.replayVsFloor}, ${r.ofMeans.storeReplayVsFloor})`,
          )
        }
        const tx = results.http.transactional
        log(
          `  tRPC, transactional: first ÷ transactional floor ${tx.firstVsTxFloor}, drizzle insert ÷ it ${tx.drizzleVsTxFloor}, unprepared ÷ it ${tx.unpreparedVsTxFloor}, first ÷ floor ${tx.firstVsFloor}, ÷ ours outside transactional mode ${tx.firstVsOurs}; the floor as the mode runs it ÷ the transactional floor ${tx.modeFloorVsTxFloor}, first ÷ it ${tx.firstVsModeFloor} (medians of rounds; ratios of means ${tx.ofMeans.firstVsTxFloor}, ${tx.ofMeans.unpreparedVsTxFloor}, ${tx.ofMeans.firstVsFloor}, ${tx.ofMeans.firstVsOurs}, ${tx.ofMeans.modeFloorVsTxFloor}, ${tx.ofMeans.firstVsModeFloor})`,
        )
        const trips = results.http.roundTripsPerRequest
        if (trips) {
          log(
            `  round trips per request: ${Object.entries(trips)
              .filter(([name]) => name.includes('first execution') && name.startsWith('tRPC'))
              .map(
                ([name, count]) =>
                  `${name.replace('tRPC ', '').replace(': first execution', '')} ${count}`,
              )
              .join(', ')}`,
          )
        }
        const spec = results.http.specRecordFloor
        log(
          `  tRPC floor on the SPEC's record: ÷ floor ${spec.vsFloor}, ours ÷ it ${spec.oursVsIt} (medians of rounds; ratios of means ${spec.ofMeans.vsFloor}, ${spec.ofMeans.oursVsIt})`,
        )
        const again = results.http.floorAgainVsFloor
        log(
          `  A/A control, the tRPC floor twice: ${again.medianOfRounds} (ratio of means ${again.ofMeans})`,
        )
      } finally {
        await database.close()
      }
    }
    if (wanted('load')) {
      if (databaseUrl) {
        log(
          `under load: ${loadClients} clients, tRPC and Yoga in a server process, ours vs floor ...`,
        )
        results.load = await benchLoad(lib, databaseUrl, redisUrl, budgets.load)
        for (const line of loadLines(results.load)) log(`  ${line}`)
      } else {
        log('under load: skipped (DATABASE_URL is not set)')
      }
    }
  } finally {
    await lib.dispose()
  }

  const durationSeconds = Math.round((performance.now() - startedAt) / 100) / 10
  const complete: Results = {
    ...results,
    durationSeconds,
    targets: checkTargets({ ...results, durationSeconds }),
  }
  await finishRun({ name: 'latest', results: complete, markdown: toMarkdown(complete), quick, log })
}

main().then(
  // Open handles of the peers' clients must not keep the process alive.
  () => process.exit(0),
  (error: unknown) => {
    console.error(error)
    process.exit(1)
  },
)
