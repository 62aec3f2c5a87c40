/** Callers running first executions back to back, each operation timed and labelled. */
import { percentile, round } from '../lib/measure'

export interface WindowStats {
  ops: number
  seconds: number
  opsPerSecond: number
  p50Ms: number
  p99Ms: number
}

/**
 * `callers` loops, each running `op` back to back until `until` settles (an operation in flight
 * then finishes and counts). Each operation's latency is filed under `phase()` as it was when
 * the operation started.
 */
export async function runCallers(
  callers: number,
  op: () => Promise<unknown>,
  until: Promise<unknown>,
  phase: () => string,
): Promise<Map<string, number[]>> {
  let done = false
  const stop = () => {
    done = true
  }
  until.then(stop, stop)
  const latencies = new Map<string, number[]>()
  const caller = async () => {
    while (!done) {
      const label = phase()
      const t0 = performance.now()
      await op()
      const list = latencies.get(label) ?? []
      list.push(performance.now() - t0)
      latencies.set(label, list)
    }
  }
  await Promise.all(Array.from({ length: callers }, caller))
  return latencies
}

/** Throughput and percentiles of `latencies`, operations started over `seconds`. */
export function windowStats(latencies: number[] = [], seconds: number): WindowStats {
  return {
    ops: latencies.length,
    seconds: round(seconds, 2),
    opsPerSecond: Math.round(latencies.length / seconds),
    p50Ms: round(percentile(latencies, 0.5), 3),
    p99Ms: round(percentile(latencies, 0.99), 3),
  }
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))
