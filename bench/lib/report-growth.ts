/** The growth section's Markdown (see bench/sections/growth.ts and in-flight.ts). */
import type { GrowthResult } from '../sections/growth'
import { table } from './markdown'

const sizeName = (kib: number) => (kib >= 1024 ? `${kib / 1024} MiB` : `${kib} KiB`)
const kB = (bytes: number) => `${Math.round(bytes / 100) / 10} kB`

export function growthMarkdown(growth: GrowthResult): string[] {
  const sizes = growth.curves[0]?.sizes.map((s) => s.kib) ?? []
  const largest = sizes.at(-1) ?? 0
  return [
    '',
    '## Growth with the work (memory store)',
    '',
    `CPU µs per operation (the process's, median of rounds) and, in brackets, per KiB of JSON. Through the engine: a first execution or a replay with a payload or response of the size, minus the same with the small fixture, in the same rounds (\`maxResponseBytes\` ${growth.maxResponseBytes / 1024 / 1024} MiB; the replay with the replay cache off). The last column is the cost per KiB at ${sizeName(largest)} ÷ at 16 KiB: 1.00 is linear.`,
    '',
    table(
      ['', ...sizes.map(sizeName), `per KiB, ${sizeName(largest)} ÷ 16 KiB`],
      growth.curves.map((curve) => [
        curve.name,
        ...curve.sizes.map((s) => `${s.usPerOp} (${s.usPerKiB})`),
        curve.linearity,
      ]),
    ),
    '',
    "Heap held by first executions in flight (their handlers waiting), per 1,000: ours, a baseline of as many pending async calls holding the same requests, and ours minus the baseline (the engine's lease and closures and the memory store's records). After a full garbage collection, the median of several readings.",
    '',
    table(
      ['in flight', 'ours, per 1,000', 'baseline, per 1,000', "engine's share, per 1,000"],
      growth.inFlight.map((m) => [
        m.operations,
        kB(m.oursPer1000),
        kB(m.baselinePer1000),
        kB(m.enginePer1000),
      ]),
    ),
  ]
}

/** The section's console lines. */
export function growthLines(growth: GrowthResult): string[] {
  return [
    ...growth.curves.map((curve) => {
      const perKiB = curve.sizes.map((s) => `${s.kib} KiB ${s.usPerKiB}`).join(', ')
      return `${curve.name}: CPU µs per KiB ${perKiB}; linearity ${curve.linearity}`
    }),
    ...growth.inFlight.map(
      (m) =>
        `${m.operations} in flight: ${m.oursPer1000} bytes per 1,000 (baseline ${m.baselinePer1000}, engine's share ${m.enginePer1000})`,
    ),
  ]
}
