/**
 * Completions that outlive the request. A completion the store fails (or does not answer within
 * its bound) is retried with a growing pause for as long as the executor's lease lasts: the
 * record stays in progress meanwhile (retries of the key get 409), so a store outage shorter
 * than the lease ends with the outcome recorded and no second execution. Every attempt is
 * fenced by the lease token, so an attempt that lands late can never overwrite another
 * executor's outcome.
 *
 *   attempt ─✗─ 25 ms ─✗─ 100 ms ─✗─ 400 ms ─✗─ 1 s ─✗─ 2 s … (at most 5 s) ─✓ recorded
 *   └──────── the caller waits up to completeTimeout ────────┘└── background, until the lease ends
 */

/** How a completion ended. */
export type CompletionResult =
  | { kind: 'recorded' }
  /** The store said no: the key was taken over or released (the lease token did not match). */
  | { kind: 'lost-lease' }
  /** Every attempt failed until the lease ended (or the engine closed); `error` is the last. */
  | { kind: 'gave-up'; error: unknown }

export const completionPauses: readonly number[] = [25, 100, 400, 1000, 2000, 5000]

export interface RetriedCompletion {
  /** One attempt, bounded by the caller: true when recorded, false when the lease was lost. */
  attempt: () => Promise<boolean>
  /** On the engine's clock: when the lease ends, and with it the point of trying. */
  leaseEndsAt: number
  now: () => number
  /** Called after each failed attempt that will be tried again. */
  onFailure?: ((error: unknown, attempt: number) => void) | undefined
}

/**
 * Background work of one engine: completions still being retried. `drain()` waits for them
 * (tests, a graceful shutdown), `close()` cuts their pauses short and makes them give up.
 */
export class BackgroundWork {
  readonly #pending = new Set<Promise<unknown>>()
  readonly #wakers = new Set<() => void>()
  #closed = false

  get closed(): boolean {
    return this.#closed
  }

  /** Keeps `task` until it settles; its rejection is handled here (the task reports its own). */
  track<T>(task: Promise<T>): Promise<T> {
    this.#pending.add(task)
    const forget = () => this.#pending.delete(task)
    task.then(forget, forget)
    return task
  }

  /** Resolves once every tracked task has settled, those started meanwhile included. */
  async drain(): Promise<void> {
    while (this.#pending.size > 0) await Promise.allSettled([...this.#pending])
  }

  /** Makes every retry loop give up at its next pause. */
  close(): void {
    this.#closed = true
    for (const wake of this.#wakers) wake()
    this.#wakers.clear()
  }

  /** Waits `ms`, or less if the engine closes meanwhile. */
  pause(ms: number): Promise<void> {
    if (this.#closed) return Promise.resolve()
    return new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(timer)
        this.#wakers.delete(wake)
        resolve()
      }
      const timer = setTimeout(wake, ms)
      timer.unref?.()
      this.#wakers.add(wake)
    })
  }

  /** Tries `completion` until it lands, the store refuses it, or the lease ends. Never rejects. */
  async retry(completion: RetriedCompletion): Promise<CompletionResult> {
    for (let attempt = 0; ; attempt++) {
      try {
        return (await completion.attempt()) ? { kind: 'recorded' } : { kind: 'lost-lease' }
      } catch (error) {
        const pause = completionPauses[Math.min(attempt, completionPauses.length - 1)]!
        const left = completion.leaseEndsAt - completion.now()
        if (this.#closed || left <= 0) return { kind: 'gave-up', error }
        completion.onFailure?.(error, attempt)
        await this.pause(Math.min(pause, left))
      }
    }
  }
}
