/** Turns a run's results into the checked targets, the Markdown summary and the console lines. */
import type { DrizzleResult } from '../sections/drizzle'
import type { EngineResult } from '../sections/engine'
import type { GrowthResult } from '../sections/growth'
import type { HttpRatios, HttpResult, TransactionalRatios } from '../sections/http'
import type { LoadResult } from '../sections/load'
import type { RedisResult } from '../sections/redis'
import type { TelemetryResult } from '../sections/telemetry'
import type { Machine } from './machine'
import { answers, latencyRows, table, targetsTable } from './markdown'
import { byName } from './measure'
import { growthMarkdown } from './report-growth'
import { loadMarkdown, loadTargets } from './report-load'
import { redisMarkdown, redisTargets } from './report-redis'

export interface Results {
  machine: Machine
  mode: 'full' | 'quick'
  /** What the package was measured as: the tsup build, or the sources through tsx. */
  measured: 'build' | 'source'
  backends: { pglite: boolean; postgres: boolean; redis: boolean; mariadb: boolean }
  durationSeconds: number
  engine?: EngineResult
  growth?: GrowthResult
  telemetry?: TelemetryResult
  drizzle: DrizzleResult[]
  redis?: RedisResult
  http?: HttpResult
  load?: LoadResult
  targets: Target[]
}

export interface Target {
  name: string
  target: string
  measured: string
  met: boolean
}

export function checkTargets(results: Omit<Results, 'targets'>): Target[] {
  const targets: Target[] = []
  const { engine, http } = results
  if (engine) {
    const { ours, powertools, 'node-idempotency': nodeIdempotency } = engine.overheadUs
    targets.push(
      {
        name: 'engine overhead, keyed first execution (memory store)',
        target: '≤ 8 µs CPU over a direct call',
        measured: `${ours!.first} µs`,
        met: ours!.first <= 8,
      },
      {
        name: 'engine overhead, replay (memory store)',
        target: '≤ 5 µs CPU over a direct call',
        measured: `${ours!.replay} µs`,
        met: ours!.replay <= 5,
      },
    )
    for (const [path, key] of [
      ['first execution', 'first'],
      ['replay', 'replay'],
    ] as const) {
      targets.push({
        name: `engine ${path} ahead of both peers (in-memory backend)`,
        target: 'less CPU than Powertools and @node-idempotency/core',
        measured: `ours ${ours![key]} µs, Powertools ${powertools![key]} µs, node-idempotency ${nodeIdempotency![key]} µs`,
        met: ours![key] < powertools![key] && ours![key] < nodeIdempotency![key],
      })
    }
  }
  if (results.telemetry) {
    const { overheadUs, ratios } = results.telemetry
    const noSdk = overheadUs['no SDK']
    targets.push(
      {
        name: 'engine with OpenTelemetry and no SDK registered (memory store)',
        target: 'within the engine targets: ≤ 8 µs CPU first execution, ≤ 5 µs replay',
        measured: `${noSdk.first} µs / ${noSdk.replay} µs`,
        met: noSdk.first <= 8 && noSdk.replay <= 5,
      },
      {
        name: 'OpenTelemetry with no SDK registered vs telemetry off',
        target: '≤ 1.05× time per operation, first execution and replay',
        measured: `${ratios.noSdkVsOff.first}× / ${ratios.noSdkVsOff.replay}× (A/A control ${ratios.control.first}× / ${ratios.control.replay}×)`,
        met: ratios.noSdkVsOff.first <= 1.05 && ratios.noSdkVsOff.replay <= 1.05,
      },
    )
  }
  for (const drizzle of results.drizzle) {
    for (const { concurrency, result } of drizzle.storms) {
      targets.push({
        name: `${drizzle.backend}: ${result.callers}-caller storm on one key (${concurrency})`,
        target: 'handler runs once, every caller answered',
        measured: `${result.executions} execution(s), ${result.unanswered} unanswered`,
        met: result.executions === 1 && result.unanswered === 0,
      })
    }
  }
  if (results.redis) targets.push(...redisTargets(results.redis))
  if (http) {
    for (const adapter of ['tRPC', 'Yoga'] as const) {
      const ratios = http.ratios[adapter]
      const of = (paired: number, ofMeans: number) => `${paired}× (ratio of means ${ofMeans}×)`
      targets.push(
        {
          name: `${adapter} over HTTP (${http.backend}): first execution vs hand-written SQL floor`,
          target: '≤ 1.10×',
          measured: of(ratios.firstVsFloor, ratios.ofMeans.firstVsFloor),
          met: ratios.firstVsFloor <= 1.1,
        },
        {
          name: `${adapter} over HTTP (${http.backend}): replay vs hand-written SQL floor`,
          target: '≤ 1.00×',
          measured: of(ratios.replayVsFloor, ratios.ofMeans.replayVsFloor),
          met: ratios.replayVsFloor <= 1,
        },
        {
          name: `${adapter} over HTTP (${http.backend}): replay with the replay cache off vs hand-written SQL floor`,
          target: '≤ 1.00×',
          measured: of(ratios.storeReplayVsFloor, ratios.ofMeans.storeReplayVsFloor),
          met: ratios.storeReplayVsFloor <= 1,
        },
      )
    }
    if (http.backend === 'postgres') targets.push(transactionalTarget(http.transactional))
  }
  targets.push({
    name: '`npm run bench` duration',
    target: '< 180 s',
    measured: `${results.durationSeconds} s`,
    met: results.durationSeconds < 180,
  })
  if (results.load) targets.push(...loadTargets(results.load))
  return targets
}

export function toMarkdown(results: Results): string {
  const { machine } = results
  const ran = Object.entries(results.backends)
    .filter(([, on]) => on)
    .map(([name]) => name)
  const out: string[] = [
    '# Benchmark results',
    '',
    `${machine.date} · ${machine.cpuModel}, ${machine.cores} cores, ${machine.memoryGiB} GiB · Node ${machine.node} (${machine.platform}) · load average at start ${machine.loadAverageAtStart} · backends: ${ran.join(', ')} · measured: ${results.measured === 'build' ? 'the tsup build' : 'sources through tsx'} · ${results.durationSeconds} s`,
    '',
    'Every comparison ran its variants interleaved in one process; compare ratios, not absolute times.',
    '',
    '## Targets',
    '',
    targetsTable(results.targets),
  ]
  if (results.engine) {
    const { engine } = results
    out.push(
      '',
      '## Engine overhead (in-memory backend)',
      '',
      'CPU µs per operation of the whole process (`process.cpuUsage`), and the same minus a direct call of the handler.',
      '',
      table(
        ['variant', 'ops/s', 'CPU µs/op', 'CPU µs over direct call'],
        engine.variants.map((v) => {
          const direct = byName(engine.variants, 'direct call').cpuUsPerOp
          return [
            v.name,
            v.opsPerSecond,
            v.cpuUsPerOp,
            v.name === 'direct call' ? '–' : Math.round((v.cpuUsPerOp - direct) * 100) / 100,
          ]
        }),
      ),
    )
  }
  if (results.growth) out.push(...growthMarkdown(results.growth))
  if (results.telemetry) {
    const { telemetry } = results
    const direct = byName(telemetry.variants, 'direct call').cpuUsPerOp
    const { noSdkVsOff, control, sdkVsNoSdk } = telemetry.ratios
    out.push(
      '',
      '## OpenTelemetry (in-memory backend)',
      '',
      'The engine with telemetry turned off, by default in a process with no SDK registered (twice: an A/A control), and recording into an SDK (a tracer provider without an exporter, a meter provider aggregating). CPU µs per operation, and the same minus a direct call of the handler.',
      '',
      table(
        ['variant', 'ops/s', 'CPU µs/op', 'CPU µs over direct call'],
        telemetry.variants.map((v) => [
          v.name,
          v.opsPerSecond,
          v.cpuUsPerOp,
          v.name === 'direct call' ? '–' : Math.round((v.cpuUsPerOp - direct) * 100) / 100,
        ]),
      ),
      '',
      'Time per operation, one engine ÷ another: the median over the rounds of the quotient within one round.',
      '',
      table(
        ['', 'first execution', 'replay'],
        [
          ['no SDK ÷ telemetry off', noSdkVsOff.first, noSdkVsOff.replay],
          ['A/A control: no SDK ÷ no SDK', control.first, control.replay],
          ['SDK ÷ no SDK', sdkVsNoSdk.first, sdkVsNoSdk.replay],
        ],
      ),
    )
  }
  for (const drizzle of results.drizzle) {
    out.push(
      '',
      `## Drizzle store on ${drizzle.backend}`,
      '',
      `Pool: ${drizzle.poolSize} connection(s) · ${Object.entries(drizzle.settings)
        .filter(([name]) => name !== 'server_version')
        .map(([name, value]) => `${name}=${value}`)
        .join(
          ', ',
        )} · server ${drizzle.settings.server_version} · SQL statements per first execution: ${drizzle.statementsPerOp.firstExecution}, per replay: ${drizzle.statementsPerOp.replay} (${drizzle.statementsPerOp.cachedReplay} from the replay cache)`,
      '',
      table(['one caller', 'p50 ms', 'p99 ms', 'ops/s', 'CPU µs/op'], latencyRows(drizzle.latency)),
      '',
      table(
        ['distinct keys in flight', 'first executions/s', 'p50 ms', 'p99 ms'],
        drizzle.throughput.map((t) => [t.keysInFlight, t.opsPerSecond, t.p50Ms, t.p99Ms]),
      ),
      '',
      table(
        ['storm on one key', 'callers', 'handler ran', 'all answered after ms', 'answers'],
        drizzle.storms.map(({ concurrency, result }) => [
          `concurrency: '${concurrency}'`,
          result.callers,
          result.executions,
          result.allAnsweredMs,
          answers(result),
        ]),
      ),
    )
  }
  if (results.redis) out.push(...redisMarkdown(results.redis))
  if (results.http) {
    const { http } = results
    out.push(
      '',
      `## End to end over HTTP (${http.backend}, synchronous_commit=${http.settings.synchronous_commit}, fsync=${http.settings.fsync})`,
      '',
      table(
        [
          'request',
          'mean ms',
          'p50 ms',
          'p99 ms',
          'SQL statements',
          'round trips',
          'CPU µs/request',
        ],
        http.variants.map((v) => [
          v.name,
          Math.round(v.wallUsPerOp) / 1000,
          v.p50Ms,
          v.p99Ms,
          http.statementsPerRequest[v.name],
          http.roundTripsPerRequest?.[v.name] ?? '',
          v.cpuUsPerOp,
        ]),
      ),
      '',
      "Time per request relative to another variant: the median over the rounds of the quotient within one round, and below it the quotient of the whole run's means.",
      '',
      table(
        [
          'adapter',
          'first execution ÷ plain',
          'replay ÷ plain',
          'first execution ÷ floor',
          'replay ÷ floor',
          'replay, cache off ÷ floor',
          'floor first ÷ plain',
        ],
        (['tRPC', 'Yoga'] as const).flatMap((adapter) => {
          const row = (label: string, r: HttpRatios) => [
            label,
            r.firstVsPlain,
            r.replayVsPlain,
            r.firstVsFloor,
            r.replayVsFloor,
            r.storeReplayVsFloor,
            r.floorFirstVsPlain,
          ]
          const r = http.ratios[adapter]
          return [
            row(`${adapter} (median of rounds)`, r),
            row(`${adapter} (ratio of means)`, r.ofMeans),
          ]
        }),
      ),
      '',
      transactionalLine(http.transactional),
      '',
      `The tRPC floor on a table of the SPEC's record (eight columns, the \`expires_at\` index, the store's parameters): ÷ floor ${http.specRecordFloor.vsFloor} (ratio of means ${http.specRecordFloor.ofMeans.vsFloor}); ours ÷ it ${http.specRecordFloor.oursVsIt} (${http.specRecordFloor.ofMeans.oursVsIt}).`,
      '',
      `A/A control, the machine's noise in this run: the tRPC floor measured twice under two names, second ÷ first ${http.floorAgainVsFloor.medianOfRounds} (ratio of means ${http.floorAgainVsFloor.ofMeans}).`,
    )
  }
  if (results.load) out.push(...loadMarkdown(results.load))
  return `${out.join('\n')}\n`
}

function transactionalTarget(tx: HttpResult['transactional']): Target {
  return {
    name: 'tRPC in transactional mode (postgres): first execution vs its own floor (BEGIN, claim, insert, complete, COMMIT)',
    target: '≤ 1.10×',
    measured: `${tx.firstVsTxFloor}× (ratio of means ${tx.ofMeans.firstVsTxFloor}×); the floor as the mode runs it ÷ the floor ${tx.modeFloorVsTxFloor}×, ours ÷ it ${tx.firstVsModeFloor}×`,
    met: tx.firstVsTxFloor <= 1.1,
  }
}

function transactionalLine(tx: HttpResult['transactional']): string {
  const pair = (field: keyof TransactionalRatios) =>
    `${tx[field]} (ratio of means ${tx.ofMeans[field]})`
  return [
    "tRPC in transactional mode (the claim, the handler's insert and the completion in one transaction, one commit; the SQL statement count, from drizzle's logger and the bench's own, leaves out BEGIN, SAVEPOINT and COMMIT; round trips count them):",
    `first execution, the handler inserting with the floor's own prepared statement on the transaction's connection, ÷ the transactional floor (BEGIN, claim, insert, complete, COMMIT, hand-written and prepared) ${pair('firstVsTxFloor')};`,
    `with the handler's insert built by drizzle and named with \`.prepare()\` ${pair('drizzleVsTxFloor')}, by drizzle unprepared ${pair('unpreparedVsTxFloor')};`,
    `÷ the floor outside a transaction ${pair('firstVsFloor')}; ÷ ours outside transactional mode ${pair('firstVsOurs')}.`,
    `The transactional floor as the mode runs it (in a drizzle transaction, on the SPEC's record, a SAVEPOINT sent with the claim before the insert) ÷ the transactional floor ${pair('modeFloorVsTxFloor')}; ours ÷ it ${pair('firstVsModeFloor')}.`,
  ].join(' ')
}
