/**
 * Growth with the work: what the fingerprint and the codec cost per KiB of input and of output,
 * from 1 KiB to 1 MiB, and (./in-flight.ts) the engine's memory per 1,000 operations in flight,
 * on the memory store.
 *
 * The fingerprint and the codec's encode are the package's own exports (`fingerprint`,
 * `defaultCodec`), called directly. Through the engine, each one is the difference between two
 * `execute` calls measured in the same rounds: a first execution with a payload (or a response)
 * of the size minus one with the small fixture. A replay's decode is measured only that way
 * (replay cache off): for outcomes the default codec wrote as plain JSON, the engine reads the
 * value's text with `JSON.parse`, not through `defaultCodec.decode`. `JSON.stringify` and
 * `JSON.parse` of the same document run alongside: V8's own cost per KiB, to read the rest against.
 */
import type { Library } from '../lib/build'
import { type Budget, byName, compare, medianOf, round, type VariantStats } from '../lib/measure'
import { type Order, orderInput, orderOfSize } from './fixtures'
import { type InFlightBudget, type InFlightMemory, inFlightMemory } from './in-flight'

export interface GrowthBudgets {
  /** Payload and response sizes, in KiB. */
  sizesKiB: number[]
  /** Bytes each variant works through per round: its batch is this ÷ the size (at least 2). */
  bytesPerRound: number
  /** Rounds and time per size. */
  rounds: number
  maxMs: number
  warmupRounds: number
  /** Operations in flight at once for the memory measurement, and readings of each (median). */
  inFlight: InFlightBudget[]
}

export interface SizeCost {
  kib: number
  /**
   * CPU µs per operation (the process's, garbage collection included): the median over the
   * rounds (through the engine: of the difference within each round).
   */
  usPerOp: number
  usPerKiB: number
}

export interface GrowthCurve {
  name: string
  sizes: SizeCost[]
  /** µs per KiB at the largest size ÷ at 16 KiB: 1.00 is linear, above it grows faster. */
  linearity: number
}

export interface GrowthResult {
  budgets: GrowthBudgets
  /** The engine's `maxResponseBytes` here: the default (1 MiB) refuses a 1 MiB response. */
  maxResponseBytes: number
  curves: GrowthCurve[]
  inFlight: InFlightMemory[]
}

/** Each curve: its name, the variant, and the variant subtracted from it (none: called directly). */
const curves = [
  ['fingerprint(payload)', 'fingerprint', undefined],
  ['defaultCodec.encode(outcome)', 'encode', undefined],
  ['first execution, payload of the size', 'first: payload', 'first: small'],
  ['first execution, response of the size', 'first: response', 'first: small'],
  ['replay (cache off), response of the size', 'replay: response', 'replay: small'],
  ['for reference: JSON.stringify(payload)', 'stringify', undefined],
  ['for reference: JSON.parse(its text)', 'parse', undefined],
] as const

const maxResponseBytes = 4 * 1024 * 1024

export async function benchGrowth(lib: Library, budgets: GrowthBudgets): Promise<GrowthResult> {
  const perSize: { kib: number; stats: VariantStats[] }[] = []
  for (const kib of budgets.sizesKiB) {
    perSize.push({ kib, stats: await measureSize(lib, kib, budgets) })
  }
  // CPU time, not wall: on a machine shared with other work, wall time also counts the time this
  // process waited for a core. A difference is taken round by round (both ran in the same
  // round), then its median.
  const usPerOp = (stats: VariantStats[], name: string, base: string | undefined) => {
    const rounds = byName(stats, name).roundCpuUs
    const bases = base ? byName(stats, base).roundCpuUs : undefined
    return medianOf(bases ? rounds.map((us, i) => us - bases[i]!) : rounds)
  }
  return {
    budgets,
    maxResponseBytes,
    curves: curves.map(([name, variant, base]) => {
      const sizes = perSize.map(({ kib, stats }) => {
        const us = usPerOp(stats, variant, base)
        return { kib, usPerOp: round(us, 1), usPerKiB: round(us / kib, 3) }
      })
      return { name, sizes, linearity: linearity(sizes) }
    }),
    inFlight: await inFlightMemory(lib, budgets.inFlight),
  }
}

/** The variants at one size, interleaved in rounds; a fresh engine so records never pile up. */
async function measureSize(lib: Library, kib: number, budgets: GrowthBudgets) {
  const { fingerprint, defaultCodec, createIdempotency, createMemoryStore } = lib.core
  const document = orderOfSize(kib * 1024)
  const text = JSON.stringify(document)
  const small: Order = { id: 'order-1', item: 'standing desk', quantity: 2, total: 199.5 }
  const idempotency = createIdempotency({
    store: createMemoryStore(),
    replayCache: false,
    maxResponseBytes,
  })
  const execute = (key: string, payload: unknown, response: unknown) =>
    idempotency.execute({ key, operation: 'orders.create', payload }, async () => response)
  await execute('replay-response', orderInput, document)
  await execute('replay-small', orderInput, small)

  const variants = [
    { name: 'stringify', op: () => JSON.stringify(document) },
    { name: 'parse', op: () => JSON.parse(text) },
    { name: 'fingerprint', op: () => fingerprint(document) },
    { name: 'encode', op: () => defaultCodec.encode({ ok: true, value: document }) },
    { name: 'first: small', op: (i: number) => execute(`small-${i}`, orderInput, small) },
    { name: 'first: payload', op: (i: number) => execute(`payload-${i}`, document, small) },
    { name: 'first: response', op: (i: number) => execute(`response-${i}`, orderInput, document) },
    { name: 'replay: small', op: () => execute('replay-small', orderInput, small) },
    { name: 'replay: response', op: () => execute('replay-response', orderInput, document) },
  ]
  const batch = Math.max(2, Math.round(budgets.bytesPerRound / (kib * 1024)))
  const { rounds, maxMs, warmupRounds } = budgets
  const budget: Budget = { batch, rounds, minRounds: Math.min(3, rounds), maxMs, warmupRounds }
  return compare(variants, budget)
}

/** Per-KiB cost at the largest size ÷ at 16 KiB (or the smallest size, when 16 is not run). */
function linearity(sizes: SizeCost[]): number {
  const largest = sizes.at(-1)
  const reference = sizes.find((s) => s.kib === 16) ?? sizes[0]
  if (!largest || !reference || reference.usPerKiB <= 0) return Number.NaN
  return round(largest.usPerKiB / reference.usPerKiB, 2)
}
