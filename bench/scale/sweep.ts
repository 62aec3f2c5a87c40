/**
 * Part 2, sweeping while serving: `sweep()` deletes expired records of the big table on a
 * connection of its own while callers run first executions on the run's pool. The sweep runs in
 * stretches (`onMs`) with stretches without it between (`offMs`), and each caller operation is
 * filed under whether the sweep was running when it started: the two sides share the machine's
 * slow spells and the server's checkpoints, as the interleaved rounds of bench/lib/measure.ts
 * do. After each sweep: VACUUM, then as many new records as it deleted, to see whether they fit
 * in the space it freed.
 */
import type { Library } from '../lib/build'
import type { PgDatabase } from '../lib/database'
import { ratio } from '../lib/measure'
import { runCallers, sleep, type WindowStats, windowStats } from './callers'
import { openConnection } from './connections'
import { type LockSamples, sampleLocks } from './locks'
import { sizeOf, type TableSize, vacuum, vacuumState } from './sizes'
import { createScaleTable, insertRecords, type ScaleTable, seconds, writtenNow } from './tables'

export interface SweepSetting {
  batchSize: number
  /** Pause between batches in milliseconds; 0 runs them back to back, as `sweep()` does. */
  pauseMs: number
}

export interface SweepBudget {
  callers: number
  /** Records each sweep deletes (its `limit`). */
  rows: number
  /** Length of a stretch with the sweep running, and of one without it between. */
  onMs: number
  offMs: number
  settings: SweepSetting[]
  lockSampleMs: number
}

export interface SweepRun {
  setting: SweepSetting
  rows: number
  batches: number
  /** Time the sweep was running (its pauses included), and its rows per second of it. */
  activeSeconds: number
  rowsPerSecond: number
  /** The callers' operations that started while the sweep ran, and between its stretches. */
  during: WindowStats
  between: WindowStats
  /** p99 with the sweep ÷ without. */
  p99Ratio: number
  /** Throughput with the sweep ÷ without. */
  throughputRatio: number
  locks: LockSamples
  /** Dead rows before and after the VACUUM that followed (pg_stat_user_tables). */
  deadTuplesBefore: number
  deadTuplesAfter: number
  vacuumSeconds: number
  lastAutovacuum: string | null
  /** Seconds to insert as many new records as the sweep deleted, after the VACUUM. */
  refillSeconds: number
  sizes: TableSize[]
}

/** Runs `setting`'s batches, `limit` rows at most, in stretches; `state.sweeping` says when. */
async function sweepInStretches(
  table: ScaleTable,
  { batchSize, pauseMs }: SweepSetting,
  budget: SweepBudget,
  state: { sweeping: boolean },
) {
  let rows = 0
  let batches = 0
  let activeMs = 0
  for (let ended = false; !ended; ) {
    state.sweeping = true
    const startedAt = performance.now()
    while (performance.now() - startedAt < budget.onMs) {
      const size = Math.min(batchSize, budget.rows - rows)
      const deleted = await table.store.sweep({ batchSize: size, limit: size })
      rows += deleted
      batches++
      // Done, or a short batch: nothing expired is left (what `sweep()` stops on).
      ended = rows >= budget.rows || deleted < size
      if (ended) break
      if (pauseMs > 0) await sleep(pauseMs)
    }
    activeMs += performance.now() - startedAt
    state.sweeping = false
    if (!ended) await sleep(budget.offMs)
  }
  return { rows, batches, activeSeconds: activeMs / 1000 }
}

/** One sweep under the callers, then VACUUM and as many new records as it deleted. */
async function sweepRun(
  database: PgDatabase,
  table: ScaleTable,
  sweepTable: ScaleTable,
  locks: { stop(): Promise<LockSamples> },
  setting: SweepSetting,
  budget: SweepBudget,
): Promise<SweepRun> {
  const sizes = [await sizeOf(database, table, 'before the sweep')]
  const state = { sweeping: false }
  const startedAt = performance.now()
  const sweep = sweepInStretches(sweepTable, setting, budget, state)
  const phase = () => (state.sweeping ? 'during' : 'between')
  const latencies = await runCallers(budget.callers, table.firstExecution, sweep, phase)
  const elapsed = seconds(startedAt)
  const { rows, batches, activeSeconds } = await sweep
  const during = windowStats(latencies.get('during'), activeSeconds)
  const between = windowStats(latencies.get('between'), elapsed - activeSeconds)
  const lockSamples = await locks.stop()
  sizes.push(await sizeOf(database, table, 'after the sweep'))
  const dead = await vacuumState(database, table)
  const vacuumSeconds = await vacuum(database, table)
  const vacuumed = await vacuumState(database, table)
  sizes.push(await sizeOf(database, table, 'after VACUUM'))
  const refillSeconds = await insertRecords(database, table, rows, writtenNow(rows))
  sizes.push(await sizeOf(database, table, `after ${rows} new records`))
  return {
    setting,
    rows,
    batches,
    activeSeconds: Math.round(activeSeconds * 100) / 100,
    rowsPerSecond: Math.round(rows / activeSeconds),
    during,
    between,
    p99Ratio: ratio(during.p99Ms, between.p99Ms),
    throughputRatio: ratio(during.opsPerSecond, between.opsPerSecond),
    locks: lockSamples,
    deadTuplesBefore: dead.deadTuples,
    deadTuplesAfter: vacuumed.deadTuples,
    vacuumSeconds,
    lastAutovacuum: vacuumed.lastAutovacuum,
    refillSeconds,
    sizes,
  }
}

export async function benchSweep(
  lib: Library,
  database: PgDatabase,
  url: string,
  table: ScaleTable,
  callersName: string,
  budget: SweepBudget,
): Promise<SweepRun[]> {
  const sweeper = openConnection(url, `${callersName}_sweep`)
  const sampler = openConnection(url, `${callersName}_locks`)
  try {
    const sweepTable = await createScaleTable(lib, database, table.name, sweeper.db)
    const runs: SweepRun[] = []
    for (const setting of budget.settings) {
      const locks = sampleLocks(sampler, callersName, await sweeper.pid(), budget.lockSampleMs)
      runs.push(await sweepRun(database, table, sweepTable, locks, setting, budget))
    }
    return runs
  } finally {
    await sweeper.close()
    await sampler.close()
  }
}
