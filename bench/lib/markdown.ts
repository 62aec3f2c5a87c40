/** The pieces every section's Markdown is made of. */

import type { VariantStats } from './measure'
import type { StormResult } from './storm'

/** A table cell: `–` for a missing or NaN value. */
export const cell = (value: number | string | undefined) =>
  value === undefined || (typeof value === 'number' && Number.isNaN(value)) ? '–' : String(value)

export function table(header: string[], rows: (number | string | undefined)[][]): string {
  return [
    `| ${header.join(' | ')} |`,
    `|${header.map(() => '---').join('|')}|`,
    ...rows.map((row) => `| ${row.map(cell).join(' | ')} |`),
  ].join('\n')
}

export function latencyRows(variants: VariantStats[]) {
  return variants.map((v) => [v.name, v.p50Ms, v.p99Ms, v.opsPerSecond, v.cpuUsPerOp])
}

/** How a storm's callers were answered: `199 × 409 IN_PROGRESS, 1 × value`. */
export function answers(storm: StormResult): string {
  return Object.entries(storm.answers)
    .map(([kind, count]) => `${count} × ${kind}`)
    .join(', ')
}

/** A run's targets as a table: what, the target, what was measured, met or not. */
export function targetsTable(
  targets: { name: string; target: string; measured: string; met: boolean }[],
) {
  return table(
    ['what', 'target', 'measured', 'met'],
    targets.map((t) => [t.name, t.target, t.measured, t.met ? 'yes' : '**no**']),
  )
}
