/**
 * Store calls with a bound. A database driver queues queries through an outage and answers them
 * when it reconnects (tens of seconds later), or never; the engine waits for each store call at
 * most its bound, and a call that lands later is ignored (its rejection included).
 */

/** What a store call rejects with when it did not answer within its bound. */
export class StoreTimeoutError extends Error {
  override name = 'StoreTimeoutError'
  /** Which call: 'claim', 'complete', 'release' or 'commit'. */
  readonly stage: string
  readonly timeoutMs: number
  constructor(stage: string, timeoutMs: number) {
    super(`idempotent-mutations: the store did not answer a ${stage} within ${timeoutMs} ms`)
    this.stage = stage
    this.timeoutMs = timeoutMs
  }
}

/**
 * Rejects with a {@link StoreTimeoutError} when `promise` has not settled within `ms`
 * (`undefined`: no bound); a late rejection of `promise` is handled here, never unhandled.
 */
export function bounded<T>(promise: Promise<T>, ms: number | undefined, stage: string): Promise<T> {
  if (ms === undefined) return promise
  // One promise and one timer per call, on every store call: no race, no finally.
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new StoreTimeoutError(stage, ms)), ms)
    promise.then(
      (value) => {
        clearTimeout(timer)
        resolve(value)
      },
      (error: unknown) => {
        clearTimeout(timer)
        reject(error)
      },
    )
  })
}

/** A duration option that may be `false` (no bound), in milliseconds or undefined. */
export function boundOf(value: number | undefined | false): number | undefined {
  return value === false ? undefined : value
}

/**
 * True when the database itself answered with `error` (a PostgreSQL SQLSTATE, on the error or a
 * cause drizzle wrapped it in): the statement was refused, so nothing it would have done took
 * effect. False for connection errors and timeouts, which leave a COMMIT's fate unknown, and so
 * for classes 08 (connection exception) and 57 (operator intervention: a terminated backend).
 */
const sqlState = /^[0-9HPX][0-9A-Z]{4}$/

export function answeredByDatabase(error: unknown): boolean {
  for (let e = error, depth = 0; e !== null && typeof e === 'object' && depth < 5; depth++) {
    const { code, cause } = e as { code?: unknown; cause?: unknown }
    if (typeof code === 'string' && sqlState.test(code)) return !/^(08|57)/.test(code)
    e = cause
  }
  return false
}
