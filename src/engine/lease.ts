/**
 * Leases: what an executor holds while it runs a keyed operation, and how it ends. Every lease,
 * in a store or in a transaction, is settled once (`settleOnce`), and derives downstream keys
 * the same way (`deriveKey`). The lease of a store outside transactional mode is here; the
 * leases of transactional mode are in ./transactional-lease.ts.
 */
import { hashParts } from '../hash'
import type { IdempotencyRecord } from '../store'
import type { CompletionResult } from './background'
import { bounded } from './bounded'
import { type EngineContext, type EventBase, emit } from './context'
import { encodeOutcome } from './outcome'
import type { HandlerContext, Lease, Outcome } from './types'

/**
 * A stable key for a downstream provider, derived from the record's (scope, key) and `name`:
 * the same on every retry and takeover of the operation (`HandlerContext.deriveKey`).
 */
export function deriveKey(scope: string, key: string, name: string): string {
  return hashParts('idempotent-mutations/v1', scope, key, name)
}

/** The handler context of an operation that runs without a key: there is nothing to derive from. */
export const unkeyedContext: HandlerContext<never> = {
  takeover: false,
  deriveKey() {
    throw new Error(
      'idempotent-mutations: deriveKey needs a keyed operation (this one ran without a key)',
    )
  },
}

/**
 * What every lease shares: `takeover`, `deriveKey`, and settling once. `complete`,
 * `completeWithError` and `release` each end the lease; the first one called is the one that
 * counts, and any later call rejects. A subclass says what ending means (`settle`).
 */
export abstract class SettledOnceLease<TTransaction = unknown> implements Lease<TTransaction> {
  readonly takeover: boolean
  readonly deriveKey: (name: string) => string
  #settled = false

  /** `record`: the record the lease holds, or undefined for a lease without one (no key). */
  constructor(takeover: boolean, record: Pick<IdempotencyRecord, 'scope' | 'key'> | undefined) {
    this.takeover = takeover
    // An own property, not a method: adapters hand `deriveKey` on detached from the lease, and
    // a handler may spread its context.
    if (record === undefined) this.deriveKey = unkeyedContext.deriveKey
    else {
      const { scope, key } = record
      this.deriveKey = (name: string) => deriveKey(scope, key, name)
    }
  }

  /** Ends the lease with `outcome` recorded, or (undefined) with the key released. */
  protected abstract settle(outcome: Outcome | undefined): Promise<void>

  // Not `async`: that would add a promise per call. A second settling still rejects rather
  // than throwing, as an async method would.
  #settleOnce(outcome: Outcome | undefined): Promise<void> {
    if (this.#settled) {
      return Promise.reject(
        new Error('idempotent-mutations: a lease is completed or released once'),
      )
    }
    this.#settled = true
    return this.settle(outcome)
  }

  /** Records the value (or completes without a body when it cannot be stored). */
  complete(value: unknown): Promise<void> {
    return this.#settleOnce({ ok: true, value })
  }

  /** Records a deterministic error as the outcome. */
  completeWithError(errorData: unknown): Promise<void> {
    return this.#settleOnce({ ok: false, error: errorData })
  }

  /** Deletes the record so a retry can run again. */
  release(): Promise<void> {
    return this.#settleOnce(undefined)
  }
}

/**
 * The lease of a keyed operation outside transactional mode: the record is in progress in the
 * store under this lease's token, and completing or releasing it is conditional on that token.
 * Its settling methods live on the prototype: a keyed call allocates one object for its lease,
 * not a closure per method (the lease is on every first execution's path).
 */
export class StoreLease<TTransaction = unknown> extends SettledOnceLease<TTransaction> {
  readonly #context: EngineContext<TTransaction>
  // The record's fields as claimed, not the record: a store may reuse its object.
  readonly #scope: string
  readonly #key: string
  readonly #leaseToken: string
  readonly #fingerprint: string
  readonly #ttl: number
  readonly #lockTimeout: number
  readonly #base: EventBase
  readonly #startedAt: number

  constructor(
    context: EngineContext<TTransaction>,
    record: IdempotencyRecord,
    takeover: boolean,
    ttl: number,
    lockTimeout: number,
    base: EventBase,
    startedAt: number,
  ) {
    super(takeover, record)
    this.#context = context
    this.#scope = record.scope
    this.#key = record.key
    this.#leaseToken = record.leaseToken
    this.#fingerprint = record.fingerprint
    this.#ttl = ttl
    this.#lockTimeout = lockTimeout
    this.#base = base
    this.#startedAt = startedAt
  }

  protected settle(outcome: Outcome | undefined): Promise<void> {
    const settling = outcome === undefined ? this.#release() : this.#complete(outcome)
    const { trace } = this.#base
    return trace === undefined ? settling : trace.settled(settling)
  }

  /**
   * Encodes and writes the outcome, then reports it. A store that fails is tried again for as
   * long as the lease lasts (./background.ts); the caller waits for that at most
   * `completeTimeout`, and the rest goes on in the background.
   */
  async #complete(outcome: Outcome): Promise<void> {
    const context = this.#context
    const { store, completeTimeout, now } = context
    const base = this.#base
    const response = encodeOutcome(context, outcome, base)
    // Before the store reads its clock for `expires_at`: a copy from here ends no later.
    const sentAt = context.replayCache ? now() : 0
    const input = {
      scope: this.#scope,
      key: this.#key,
      leaseToken: this.#leaseToken,
      response,
      ttlMs: this.#ttl,
    }
    const { trace } = base
    const completing = () => bounded(store.complete(input), completeTimeout, 'complete')
    const completion = context.background.retry({
      // `false` may also mean that an earlier attempt, or a copy of this one the client sent
      // again after a reconnect (ioredis does), did commit and only its answer was lost: the
      // record then stands completed under this lease, which is no loss. One read, on this
      // rare path only.
      attempt: async () =>
        (await (trace === undefined ? completing() : trace.complete(completing))) ||
        (await this.#completedUnderThisLease()),
      leaseEndsAt: this.#startedAt + this.#lockTimeout,
      now,
    })
    let result: CompletionResult | undefined
    try {
      result = await bounded(completion, completeTimeout, 'complete')
    } catch (error) {
      // Still trying: the caller gets its value now, and the record stays in progress (409 to
      // retries) until the completion lands or the lease ends.
      emit(context, base, 'completion-deferred', { stage: 'complete', error })
      context.logger.warn(
        `the outcome of operation ${base.operation} is not recorded yet; still trying until its lease ends`,
      )
      const late = completion.then((ended) => this.#report(ended, response, sentAt, true))
      context.background.track(late)
    }
    if (result) this.#report(result, response, sentAt, false)
    if (context.onEvent) emit(context, base, 'executed', { durationMs: now() - this.#startedAt })
  }

  async #completedUnderThisLease(): Promise<boolean> {
    try {
      const current = await bounded(
        this.#context.store.get(this.#scope, this.#key),
        this.#context.completeTimeout,
        'complete',
      )
      return current?.status === 'completed' && current.leaseToken === this.#leaseToken
    } catch {
      return false
    }
  }

  #report(result: CompletionResult, response: string | null, sentAt: number, late: boolean) {
    const context = this.#context
    const base = this.#base
    if (result.kind === 'recorded') {
      const { replayCache } = context
      replayCache?.add(this.#scope, this.#key, this.#fingerprint, response, sentAt, this.#ttl)
      if (late) emit(context, base, 'completed-late')
    } else if (result.kind === 'lost-lease') {
      emit(context, base, 'lost-lease')
      context.logger.warn(
        `lost the lease on operation ${base.operation} before completing: the outcome was not recorded (the key was taken over or released)`,
      )
    } else {
      emit(context, base, 'store-error', { stage: 'complete', error: result.error })
      context.logger.error(
        `could not record the outcome of operation ${base.operation} before its lease ended; a retry after that runs it again`,
        result.error,
      )
    }
  }

  async #release(): Promise<void> {
    const context = this.#context
    const base = this.#base
    const input = { scope: this.#scope, key: this.#key, leaseToken: this.#leaseToken }
    const releasing = () => bounded(context.store.release(input), context.releaseTimeout, 'release')
    try {
      const ok = await (base.trace === undefined ? releasing() : base.trace.release(releasing))
      if (ok) emit(context, base, 'released')
      else {
        emit(context, base, 'lost-lease')
        context.logger.warn(
          `lost the lease on operation ${base.operation} before releasing it (the key was taken over or expired)`,
        )
      }
    } catch (error) {
      emit(context, base, 'store-error', { stage: 'release', error })
      context.logger.error(
        `could not release operation ${base.operation}; the key stays in progress until its lease ends`,
        error,
      )
    }
  }
}
