import { toMilliseconds } from '../duration'
import type { SweepOptions } from '../store'

/** The longest pause a timer can wait (2^31 - 1 ms, about 24.8 days). */
const longestPauseMs = 2_147_483_647

/**
 * `sweep()`'s options with their defaults, checked the same way by every store, before anything
 * is deleted: a TypeError names the option that is wrong.
 */
export function sweepOptionsOf(options: SweepOptions = {}) {
  const batchSize = options.batchSize ?? 1000
  const limit = options.limit ?? Number.POSITIVE_INFINITY
  if (!Number.isInteger(batchSize) || batchSize < 1) {
    throw new TypeError(
      `idempotent-mutations: sweep's batchSize must be a positive integer (got ${batchSize})`,
    )
  }
  if (!(Number.isInteger(limit) || limit === Number.POSITIVE_INFINITY) || limit < 0) {
    throw new TypeError(
      `idempotent-mutations: sweep's limit must be a non-negative integer or Infinity (got ${limit})`,
    )
  }
  const pauseMs = toMilliseconds(options.pause ?? 0, "sweep's pause")
  if (pauseMs > longestPauseMs) {
    throw new TypeError(
      `idempotent-mutations: sweep's pause must be at most ${longestPauseMs} ms (got ${pauseMs})`,
    )
  }
  const { signal } = options
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new TypeError("idempotent-mutations: sweep's signal must be an AbortSignal")
  }
  return { batchSize, limit, pauseMs, signal }
}

/** Waits `ms`, or less if `signal` aborts meanwhile. */
export function pauseUnlessAborted(ms: number, signal: AbortSignal | undefined): Promise<void> {
  if (signal?.aborted) return Promise.resolve()
  return new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer)
      signal?.removeEventListener('abort', done)
      resolve()
    }
    const timer = setTimeout(done, ms)
    signal?.addEventListener('abort', done, { once: true })
  })
}
