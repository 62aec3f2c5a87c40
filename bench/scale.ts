/**
 * `npm run bench:scale`: the Drizzle store on PostgreSQL at scale, and writes
 * bench/results/scale.json and scale.md.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npm run bench:scale
 *   npm run bench:scale -- --quick          small sizes, a few seconds: checks the script runs
 *                                           (prints, writes no results)
 *   npm run bench:scale -- --sweep=1000:0,2000:150
 *                                           the sweeps to run while serving (two by default,
 *                                           the table's backlog: more need --quick): batch
 *                                           size and pause between batches in ms, each
 *
 * 1. A big table (5 million records, 2 million of them expired) against empty ones: first
 *    executions one caller at a time and 16 at once; bytes per record; which statement uses
 *    each column and index; statements per operation (part 3).
 * 2. `sweep()` deleting 1 million of the big table's expired records while 16 callers run
 *    first executions, once per setting; lock waits; the table's size after VACUUM and as many
 *    new records.
 * 4. A table ANALYZEd while empty: its statements' cached generic plans once it holds records.
 *
 * Everything runs in the schema `im_bench_<pid>`, dropped at the end. About 6 minutes on a
 * 2-core machine.
 */

import { buildLibrary } from './lib/build'
import { openDatabase, type PgDatabase, schemaName } from './lib/database'
import { finishRun } from './lib/finish'
import { describeMachine } from './lib/machine'
import { checkLoopback } from './lib/urls'
import { benchBigTable } from './scale/big-table'
import { withApplicationName } from './scale/connections'
import { benchEmptyPlans } from './scale/empty-plans'
import { scaleMarkdown } from './scale/report'
import { benchSweep, type SweepSetting } from './scale/sweep'
import { checkScaleTargets, type ScaleResults } from './scale/targets'

const args = process.argv.slice(2)
const quick = args.includes('--quick')
const sweepArgument = args.find((arg) => arg.startsWith('--sweep='))?.slice('--sweep='.length)

const databaseUrl = process.env.DATABASE_URL || undefined
try {
  if (!databaseUrl) {
    throw new Error(
      'bench:scale needs DATABASE_URL, a PostgreSQL on this machine (e.g. postgres://postgres@127.0.0.1:5432/test)',
    )
  }
  checkLoopback('DATABASE_URL', databaseUrl)
} catch (error) {
  console.error((error as Error).message)
  process.exit(1)
}
const url = databaseUrl as string

/**
 * `--sweep=batch:pause,...`, else `sweep()`'s default (batches of 1000 back to back) and the
 * paced sweep that met the targets on a 2-core machine.
 */
function sweepSettings(): SweepSetting[] {
  if (!sweepArgument) {
    return [
      { batchSize: 1000, pauseMs: 0 },
      { batchSize: 2000, pauseMs: 150 },
    ]
  }
  return sweepArgument.split(',').map((setting) => {
    const [batchSize, pauseMs] = setting.split(':').map(Number)
    if (!Number.isInteger(batchSize) || !Number.isInteger(pauseMs ?? 0)) {
      throw new Error(`bench:scale: --sweep takes batch:pause pairs (got ${setting})`)
    }
    return { batchSize: batchSize!, pauseMs: pauseMs ?? 0 }
  })
}

const budgets = quick
  ? {
      bigTable: {
        rows: 50_000,
        expiredFraction: 0.4,
        latency: { batch: 10, rounds: 3, maxMs: 2_000 },
        concurrent: { batch: 32, rounds: 2, maxMs: 2_000, concurrency: 16 },
      },
      sweep: {
        callers: 16,
        rows: 5_000,
        onMs: 30,
        offMs: 15,
        settings: sweepSettings(),
        lockSampleMs: 50,
      },
      emptyPlans: { rows: 5_000, warmup: 10, latency: { batch: 3, rounds: 2, maxMs: 2_000 } },
    }
  : {
      bigTable: {
        rows: 5_000_000,
        expiredFraction: 0.4,
        latency: { batch: 40, rounds: 150, maxMs: 45_000, warmupRounds: 2 },
        concurrent: { batch: 320, rounds: 12, maxMs: 25_000, concurrency: 16 },
      },
      sweep: {
        callers: 16,
        rows: 1_000_000,
        onMs: 3_000,
        offMs: 1_500,
        settings: sweepSettings(),
        lockSampleMs: 50,
      },
      emptyPlans: {
        rows: 200_000,
        warmup: 10,
        latency: { batch: 5, rounds: 8, maxMs: 8_000 },
      },
    }

const log = (line: string) => console.log(`[bench:scale] ${line}`)

async function serverSettings(database: PgDatabase): Promise<Record<string, string>> {
  const settings = { ...database.settings }
  for (const name of ['autovacuum', 'shared_buffers', 'max_wal_size', 'checkpoint_timeout']) {
    const [row] = await database.query(`show ${name}`)
    settings[name] = String(Object.values(row ?? {})[0])
  }
  return settings
}

async function main(): Promise<void> {
  const startedAt = performance.now()
  const machine = describeMachine()
  log(`${machine.cpuModel}, ${machine.cores} cores, load average ${machine.loadAverageAtStart}`)
  const lib = await buildLibrary()
  const callersName = `${schemaName}_callers`
  const database = await openDatabase('postgres', withApplicationName(url, callersName))
  let results: Omit<ScaleResults, 'targets' | 'durationSeconds'>
  try {
    const settings = await serverSettings(database)
    log(`PostgreSQL ${settings.server_version}, autovacuum=${settings.autovacuum}`)
    log(`part 1: a table of ${budgets.bigTable.rows} records against empty ones ...`)
    const { table, ...bigTable } = await benchBigTable(lib, database, url, budgets.bigTable)
    log(
      `  loaded in ${bigTable.load.seconds} s; big ÷ empty p50 ${bigTable.ratios.p50}, p99 ${bigTable.ratios.p99} (A/A ${bigTable.ratios.controlP50}, ${bigTable.ratios.controlP99})`,
    )
    log('part 2: sweeping while serving ...')
    const sweep = await benchSweep(lib, database, url, table, callersName, budgets.sweep)
    for (const run of sweep) {
      log(
        `  batches of ${run.setting.batchSize}, ${run.setting.pauseMs} ms apart: ${run.rows} rows in ${run.activeSeconds} s (${run.rowsPerSecond}/s); p99 ÷ ${run.p99Ratio}, throughput ÷ ${run.throughputRatio}; callers blocked by the sweep in ${run.locks.samplesBlockedBySweep} of ${run.locks.samples} samples`,
      )
    }
    log('part 4: a table ANALYZEd while empty ...')
    const emptyPlans = await benchEmptyPlans(lib, database, url, budgets.emptyPlans)
    results = {
      machine,
      mode: quick ? 'quick' : 'full',
      settings,
      budgets,
      bigTable,
      sweep,
      emptyPlans,
    }
  } finally {
    await database.close()
    await lib.dispose()
  }
  const durationSeconds = Math.round((performance.now() - startedAt) / 100) / 10
  const complete: ScaleResults = { ...results, durationSeconds, targets: [] }
  complete.targets = checkScaleTargets(complete)
  await finishRun({
    name: 'scale',
    results: complete,
    markdown: scaleMarkdown(complete),
    quick,
    log,
  })
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error)
    process.exit(1)
  },
)
