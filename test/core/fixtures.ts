import { createTestClock } from 'idempotent-mutations/testing'
import { vi } from 'vitest'
import {
  type ClaimResult,
  createIdempotency,
  createMemoryStore,
  type IdempotencyEvent,
  type IdempotencyOptions,
  type IdempotencyStore,
} from '../../src'

/**
 * An engine on the memory store with a clock the test moves, its events and logger recorded.
 * `options.store` receives the memory store and may wrap it (faults, observation).
 */
export function createHarness(
  options: Omit<Partial<IdempotencyOptions>, 'store'> & {
    store?: (memory: IdempotencyStore) => IdempotencyStore
  } = {},
) {
  const clock = createTestClock()
  const memory = createMemoryStore({ now: clock.now })
  const store = options.store ? options.store(memory) : memory
  const events: IdempotencyEvent[] = []
  const logger = { warn: vi.fn(), error: vi.fn() }
  const idempotency = createIdempotency({
    now: clock.now,
    logger,
    onEvent: (event) => void events.push(event),
    ...options,
    store,
  })
  return {
    clock,
    memory,
    store,
    events,
    logger,
    idempotency,
    /** The event types so far, then forgets them. */
    takeEvents: () => events.splice(0).map((event) => event.type),
  }
}

/** A promise the test settles by hand: a handler blocked on it is "still running". */
export function deferred<T = void>() {
  let resolve!: (value: T) => void
  let reject!: (error: unknown) => void
  const promise = new Promise<T>((res, rej) => {
    resolve = res
    reject = rej
  })
  return { promise, resolve, reject }
}

/**
 * Wraps a store so a test can wait for the moment a claim was refused (someone else holds the
 * key): a readiness signal for "the duplicate is now waiting", instead of a sleep.
 */
export function watchClaims(inner: IdempotencyStore) {
  let refused = deferred<ClaimResult>()
  let claims = 0
  const store: IdempotencyStore = {
    ...inner,
    async claim(input) {
      claims++
      const result = await inner.claim(input)
      if (!result.claimed) {
        const signal = refused
        refused = deferred()
        signal.resolve(result)
      }
      return result
    },
  }
  return {
    store,
    /** Resolves at the next refused claim. */
    nextRefusal: () => refused.promise,
    claims: () => claims,
  }
}

export const storeDown = () => new Error('connect ECONNREFUSED 127.0.0.1:5432')
