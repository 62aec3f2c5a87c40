/** What the scale bench's results are held to, and the shape of its results file. */
import type { Machine } from '../lib/machine'
import type { Target } from '../lib/report'
import type { BigTableBudget, BigTableResult } from './big-table'
import type { EmptyPlansBudget, EmptyPlansResult } from './empty-plans'
import type { TableSize } from './sizes'
import type { SweepBudget, SweepRun } from './sweep'

export interface ScaleResults {
  machine: Machine
  mode: 'full' | 'quick'
  settings: Record<string, string>
  budgets: { bigTable: BigTableBudget; sweep: SweepBudget; emptyPlans: EmptyPlansBudget }
  bigTable: Omit<BigTableResult, 'table'>
  sweep: SweepRun[]
  emptyPlans: EmptyPlansResult
  durationSeconds: number
  targets: Target[]
}

export const settingOf = (run: SweepRun) =>
  `batchSize ${run.setting.batchSize}, ${run.setting.pauseMs} ms between batches`

/** A sweep meets its targets: the callers' p99 and throughput, and no caller waits on it. */
export const sweepMet = (run: SweepRun) =>
  run.p99Ratio <= 1.5 && run.throughputRatio >= 0.8 && run.locks.samplesBlockedBySweep === 0

/**
 * The share of the new records (as many as the sweep deleted, inserted after the VACUUM) that
 * needed new space in `part`: its growth ÷ what they take at the bytes per record before.
 */
export function newSpaceShare(run: SweepRun, part: 'heap' | 'indexes'): number {
  const [before, , vacuumed, refilled] = run.sizes as [TableSize, TableSize, TableSize, TableSize]
  const bytes = (size: TableSize) => (part === 'heap' ? size.heapBytes : size.indexBytes)
  const grown = bytes(refilled) - bytes(vacuumed)
  return Math.round((grown / (run.rows * before.bytesPerRecord[part])) * 100) / 100
}

export function checkScaleTargets(results: ScaleResults): Target[] {
  const { bigTable, sweep } = results
  const { ratios } = bigTable
  return [
    {
      name: 'first execution on the big table ÷ on an empty one, one caller',
      target: 'p50 and p99 ≤ 1.2',
      measured: `p50 ${ratios.p50}, p99 ${ratios.p99} (A/A ${ratios.controlP50}, ${ratios.controlP99})`,
      met: ratios.p50 <= 1.2 && ratios.p99 <= 1.2,
    },
    ...sweep.flatMap((run) => [
      {
        name: `16 callers while sweep() runs (${settingOf(run)}) ÷ between its stretches`,
        target: 'p99 ≤ 1.5, throughput ≥ 0.8, no caller waits on the sweep',
        measured: `p99 ${run.p99Ratio}, throughput ${run.throughputRatio}; a caller blocked by the sweep in ${run.locks.samplesBlockedBySweep} of ${run.locks.samples} samples`,
        met: sweepMet(run),
      },
      {
        name: `after the sweep (${settingOf(run)}) and a VACUUM, as many new records as it deleted`,
        target: 'fit in the heap space it freed (≤ 5 % of them on new pages)',
        measured: `${Math.round(newSpaceShare(run, 'heap') * 100)} % on new heap pages (indexes: ${Math.round(newSpaceShare(run, 'indexes') * 100)} % on new index pages)`,
        met: newSpaceShare(run, 'heap') <= 0.05,
      },
    ]),
    {
      name: 'SQL statements per first execution (claim + complete)',
      target: '2, on the big table as on an empty one',
      measured: `${bigTable.statementsPerOp.big} (empty: ${bigTable.statementsPerOp.empty})`,
      met: bigTable.statementsPerOp.big === 2 && bigTable.statementsPerOp.empty === 2,
    },
    {
      name: '`npm run bench:scale` duration',
      target: '< 600 s',
      measured: `${results.durationSeconds} s`,
      met: results.durationSeconds < 600,
    },
  ]
}
