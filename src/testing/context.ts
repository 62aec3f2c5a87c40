import { randomUUID } from 'node:crypto'
import type {
  ClaimInput,
  ClaimResult,
  IdempotencyRecord,
  IdempotencyStore,
  InspectableStore,
} from '../store'
import type { TestClock } from './clock'

export interface StoreConformanceOptions {
  /** Names the describe block (`store conformance: <name>`). */
  name: string
  /**
   * Returns the store under test, empty. Called before every test, so a test's records (and
   * its sweep) never meet another test's: give each call its own table, prefix or instance.
   */
  createStore(): IdempotencyStore | Promise<IdempotencyStore>
  /**
   * The clock the store reads, for stores with an injectable clock (like the memory store): the
   * suite moves it to expire leases and records. Leave it out for a store with a server clock
   * (a database's, Redis'): the suite then uses 50 ms leases and TTLs and polls the store's own
   * `now` (the one a refused claim reports) until it has passed the deadline; it never asserts
   * durations.
   * @default undefined (the store has a clock of its own)
   */
  clock?: TestClock | undefined
  /** How many callers race on one key in the race cases (100 or more is a real race). */
  concurrency: number
  /**
   * The store deletes records itself at `expiresAt` (as Redis key TTLs do), so `sweep()` has
   * nothing to do: the sweep case then checks that expired records are gone and `sweep()`
   * returns 0.
   * @default false
   */
  selfExpiring?: boolean | undefined
}

/** Short enough to wait out on a real server clock, long enough to mean something. */
export const shortMs = 50
export const longMs = 60 * 60 * 1000

/** What every group of cases works with: the store of the running case, and helpers. */
export interface ConformanceContext {
  readonly options: StoreConformanceOptions
  readonly concurrency: number
  readonly clock: TestClock | undefined
  /** The running case's store (a fresh one per case). */
  readonly store: IdempotencyStore
  /** A claim of a fresh (scope, key) unless overridden; tokens are always new. */
  input(overrides?: Partial<ClaimInput>): ClaimInput
  /** The same (scope, key) and payload as `first`, under a new token. */
  retry(first: ClaimInput, overrides?: Partial<ClaimInput>): ClaimInput
  claimed(result: ClaimResult): Extract<ClaimResult, { claimed: true }>
  refused(result: ClaimResult): Extract<ClaimResult, { claimed: false }>
  complete(from: ClaimInput, response: string | null, ttlMs?: number): Promise<boolean>
  release(from: ClaimInput): Promise<boolean>
  get(from: ClaimInput): Promise<IdempotencyRecord | undefined>
  /** Lets the store's clock pass `deadline` (epoch ms on the store's clock). */
  passStoreTime(deadline: number): Promise<void>
  /**
   * The running case's store with its operator's calls (`inspect`, `releaseKey`); a store
   * without them (they are optional) skips the case through `test.skip`.
   */
  operator(test: { skip(note?: string): never }): InspectableStore
}

/**
 * The context of one suite. `current()` is the store of the running case; `store` delegates to
 * it, so the cases can hold on to `store` while each case gets a fresh one.
 */
export function conformanceContext(
  options: StoreConformanceOptions,
  current: () => IdempotencyStore,
): ConformanceContext {
  const { clock } = options
  const store: IdempotencyStore = {
    claim: (input) => current().claim(input),
    complete: (input) => current().complete(input),
    release: (input) => current().release(input),
    get: (scope, key) => current().get(scope, key),
    sweep: (sweepOptions) => current().sweep(sweepOptions),
  }
  const input = (overrides: Partial<ClaimInput> = {}): ClaimInput => ({
    scope: JSON.stringify(['tenant', 'orders.create']),
    key: `key-${randomUUID()}`,
    fingerprint: 'fingerprint-a',
    leaseToken: randomUUID(),
    lockTimeoutMs: longMs,
    ttlMs: longMs,
    ...overrides,
  })
  const retry = (first: ClaimInput, overrides: Partial<ClaimInput> = {}): ClaimInput => ({
    ...first,
    leaseToken: randomUUID(),
    ...overrides,
  })
  const claimed = (result: ClaimResult) => {
    if (!result.claimed) throw new Error('expected the claim to win')
    return result
  }
  const refused = (result: ClaimResult) => {
    if (result.claimed) throw new Error('expected the claim to be refused')
    return result
  }
  async function passStoreTime(deadline: number): Promise<void> {
    if (clock) {
      clock.advance(Math.max(0, deadline - clock.now()) + 1)
      return
    }
    // The store reports its clock on a refused claim: hold a long lease on a probe key and
    // claim it again until the reported time is past the deadline.
    const probe = input({ scope: 'conformance-clock', key: randomUUID(), fingerprint: 'probe' })
    const first = claimed(await store.claim(probe))
    let now = first.record.lockedUntil - probe.lockTimeoutMs
    while (now <= deadline) {
      await new Promise((resolve) => setTimeout(resolve, 5))
      now = refused(await store.claim(retry(probe))).now
    }
  }
  const inspectable: InspectableStore = {
    ...store,
    inspect: (scope, key) => current().inspect!(scope, key),
    releaseKey: (scope, key, releaseOptions) => current().releaseKey!(scope, key, releaseOptions),
  }
  const operator = (test: { skip(note?: string): never }): InspectableStore => {
    const { inspect, releaseKey } = current()
    if (typeof inspect !== 'function' || typeof releaseKey !== 'function') {
      test.skip('the store has no inspect and releaseKey (optional calls)')
    }
    return inspectable
  }
  return {
    options,
    concurrency: options.concurrency,
    clock,
    store,
    input,
    retry,
    claimed,
    refused,
    complete: (from, response, ttlMs = longMs) =>
      store.complete({
        scope: from.scope,
        key: from.key,
        leaseToken: from.leaseToken,
        response,
        ttlMs,
      }),
    release: (from) =>
      store.release({ scope: from.scope, key: from.key, leaseToken: from.leaseToken }),
    get: (from) => store.get(from.scope, from.key),
    passStoreTime,
    operator,
  }
}
