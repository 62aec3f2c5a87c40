/**
 * Measurement helpers. Every variant of a comparison runs in the same process, in rounds that
 * interleave the variants (each round in its own shuffled order), so drift in the machine's speed (other
 * tenants, CPU boost, GC) lands on every variant alike and the ratios between them hold even
 * when absolute times do not. Every loop is bounded by both a count and a time budget.
 */

export interface Budget {
  /** Operations per variant per round. */
  batch: number
  /** Rounds at most; at least `minRounds` run even when the time budget is spent. */
  rounds: number
  minRounds?: number
  /** Wall-clock budget for all rounds of this comparison, in milliseconds. */
  maxMs: number
  /** Untimed rounds first, to let the JIT, caches and connection pools settle. */
  warmupRounds?: number
  /** Callers in flight at once (each runs `batch / concurrency` operations in turn). @default 1 */
  concurrency?: number
  /** Time each operation separately (for p50/p99). Adds a `performance.now()` pair per op. */
  latencies?: boolean
  /**
   * The CPU time, in microseconds, another process has used so far (a server under test), read
   * before and after each batch: its share per operation is reported beside this process's.
   */
  otherCpuUs?: () => Promise<number>
  /**
   * How many times this process has slept and been woken so far (voluntary context switches),
   * read before and after each batch: reported per operation.
   */
  wakeups?: () => number
}

export interface Variant {
  name: string
  /** Runs operation number `i` of this variant (numbers never repeat within a variant). */
  op: (i: number) => Promise<unknown> | unknown
}

export interface VariantStats {
  name: string
  ops: number
  wallMs: number
  /** User + system CPU time of the whole process per operation, in microseconds. */
  cpuUsPerOp: number
  /** The same of the other process the budget names ({@link Budget.otherCpuUs}). */
  otherCpuUsPerOp?: number
  /** This process's wakeups per operation ({@link Budget.wakeups}). */
  wakeupsPerOp?: number
  opsPerSecond: number
  /** Wall time per operation (wall / ops, for one caller in flight), in microseconds. */
  wallUsPerOp: number
  p50Ms?: number
  p99Ms?: number
  /** Wall time per operation in each timed round, in microseconds (for {@link pairedRatio}). */
  roundWallUs: number[]
  /** CPU time of the process per operation in each timed round, in microseconds. */
  roundCpuUs: number[]
}

interface Accumulator {
  ops: number
  wallMs: number
  cpuUs: number
  otherCpuUs: number
  wakeups: number
  latencies: number[]
  rounds: number[]
  cpuRounds: number[]
}

async function runBatch(
  variant: Variant,
  start: number,
  count: number,
  concurrency: number,
  latencies: number[] | undefined,
): Promise<void> {
  let next = start
  const end = start + count
  const worker = async () => {
    while (next < end) {
      const i = next++
      if (latencies) {
        const t0 = performance.now()
        await variant.op(i)
        latencies.push(performance.now() - t0)
      } else {
        await variant.op(i)
      }
    }
  }
  if (concurrency === 1) return worker()
  await Promise.all(Array.from({ length: concurrency }, worker))
}

/**
 * The order of the variants in round `round`: shuffled, by a generator seeded with the round, so
 * runs repeat. A rotation (each round starting one further) would keep every variant behind the
 * same predecessor, whose garbage and cache traces it would always inherit: in an A/A test of two
 * copies of one HTTP variant, the copy behind the dearer variant measured 1.5-2.5 % slower, every
 * run. Shuffled, each variant follows each other about equally often.
 */
export function roundOrder(count: number, round: number): number[] {
  const order = Array.from({ length: count }, (_, i) => i)
  // mulberry32
  let seed = (round + 1) * 0x9e3779b9
  const random = () => {
    seed = (seed + 0x6d2b79f5) | 0
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  for (let i = count - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1))
    ;[order[i], order[j]] = [order[j]!, order[i]!]
  }
  return order
}

/** Runs `variants` side by side under `budget` and returns one summary per variant. */
export async function compare(variants: Variant[], budget: Budget): Promise<VariantStats[]> {
  const concurrency = budget.concurrency ?? 1
  const minRounds = Math.min(budget.minRounds ?? 2, budget.rounds)
  const counters = variants.map(() => 0)
  const totals: Accumulator[] = variants.map(() => ({
    ops: 0,
    wallMs: 0,
    cpuUs: 0,
    otherCpuUs: 0,
    wakeups: 0,
    latencies: [],
    rounds: [],
    cpuRounds: [],
  }))

  for (let round = 0; round < (budget.warmupRounds ?? 1); round++) {
    for (const [index, variant] of variants.entries()) {
      await runBatch(variant, counters[index]!, budget.batch, concurrency, undefined)
      counters[index]! += budget.batch
    }
  }

  const startedAt = performance.now()
  for (let round = 0; round < budget.rounds; round++) {
    if (round >= minRounds && performance.now() - startedAt > budget.maxMs) break
    for (const index of roundOrder(variants.length, round)) {
      const variant = variants[index]!
      const total = totals[index]!
      const other0 = await budget.otherCpuUs?.()
      const wakeups0 = budget.wakeups?.()
      const cpu0 = process.cpuUsage()
      const t0 = performance.now()
      await runBatch(
        variant,
        counters[index]!,
        budget.batch,
        concurrency,
        budget.latencies ? total.latencies : undefined,
      )
      const wall = performance.now() - t0
      const cpu = process.cpuUsage(cpu0)
      if (wakeups0 !== undefined) total.wakeups += budget.wakeups!() - wakeups0
      if (other0 !== undefined) total.otherCpuUs += (await budget.otherCpuUs!()) - other0
      counters[index]! += budget.batch
      total.ops += budget.batch
      total.wallMs += wall
      total.cpuUs += cpu.user + cpu.system
      total.rounds.push((wall * 1000) / budget.batch)
      total.cpuRounds.push((cpu.user + cpu.system) / budget.batch)
    }
  }

  return variants.map((variant, index) => summarize(variant.name, totals[index]!))
}

function summarize(name: string, total: Accumulator): VariantStats {
  const stats: VariantStats = {
    name,
    ops: total.ops,
    wallMs: round(total.wallMs, 1),
    cpuUsPerOp: round(total.cpuUs / total.ops, 2),
    opsPerSecond: Math.round((total.ops / total.wallMs) * 1000),
    wallUsPerOp: round((total.wallMs * 1000) / total.ops, 2),
    roundWallUs: total.rounds.map((us) => round(us, 1)),
    roundCpuUs: total.cpuRounds.map((us) => round(us, 1)),
  }
  if (total.otherCpuUs > 0) stats.otherCpuUsPerOp = round(total.otherCpuUs / total.ops, 2)
  if (total.wakeups > 0) stats.wakeupsPerOp = round(total.wakeups / total.ops, 2)
  if (total.latencies.length > 0) {
    stats.p50Ms = round(percentile(total.latencies, 0.5), 3)
    stats.p99Ms = round(percentile(total.latencies, 0.99), 3)
  }
  return stats
}

/** The nearest-rank percentile of `values` (sorted here, in place). */
export function percentile(values: number[], fraction: number): number {
  if (values.length === 0) return Number.NaN
  values.sort((a, b) => a - b)
  const rank = Math.min(values.length - 1, Math.max(0, Math.ceil(fraction * values.length) - 1))
  return values[rank]!
}

export function round(value: number, digits: number): number {
  const factor = 10 ** digits
  return Math.round(value * factor) / factor
}

/** `a / b`, rounded for a table; NaN when either is missing. */
export function ratio(a: number | undefined, b: number | undefined, digits = 2): number {
  if (a === undefined || b === undefined || b === 0) return Number.NaN
  return round(a / b, digits)
}

/** The median of `values` (NaN for none). */
export function medianOf(values: number[]): number {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

/**
 * `a / b` measured round by round: the median, over the rounds of one {@link compare}, of a's
 * time per operation divided by b's in the same round. Both ran back to back in every round, so
 * a slow spell of the machine lands on both sides of each quotient, and the median is not moved
 * by the few rounds a burst of other work hit one side only. NaN without common rounds.
 */
export function pairedRatio(a: VariantStats, b: VariantStats, digits = 2): number {
  const count = Math.min(a.roundWallUs.length, b.roundWallUs.length)
  if (count === 0) return Number.NaN
  const quotients = Array.from({ length: count }, (_, i) => a.roundWallUs[i]! / b.roundWallUs[i]!)
  return round(medianOf(quotients), digits)
}

export function byName(stats: VariantStats[], name: string): VariantStats {
  const found = stats.find((s) => s.name === name)
  if (!found) throw new Error(`bench: no variant named ${name}`)
  return found
}
