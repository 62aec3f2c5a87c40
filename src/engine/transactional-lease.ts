/**
 * The leases of transactional mode: the handler writes in the transaction its record commits
 * in, and settling the lease records the outcome and commits, or rolls everything back.
 */
import { OutcomeUnknownError, StoreUnavailableError } from '../errors'
import type { IdempotencyRecord, StoreTransaction } from '../store'
import { type HeldTransaction, TransactionEndedError } from '../transaction'
import { answeredByDatabase, bounded } from './bounded'
import { type EngineContext, type EventBase, emit, retryAfterSeconds } from './context'
import { SettledOnceLease } from './lease'
import { encodeOutcome } from './outcome'
import type { Outcome } from './types'

/** What a won transactional claim holds open. */
export interface HeldClaim<TTransaction> {
  held: HeldTransaction<TTransaction>
  /** The savepoint the handler writes in. */
  savepoint: HeldTransaction<TTransaction>
  record: IdempotencyRecord
  takeover: boolean
}

/**
 * A lease that holds a transaction for the handler to write in: `tx` (own properties, not
 * methods, like `deriveKey`: a handler may spread its context), and savepoints of it.
 */
abstract class LeaseInTransaction<TTransaction> extends SettledOnceLease<TTransaction> {
  readonly tx: TTransaction
  readonly savepoint: <T>(fn: (tx: TTransaction) => Promise<T>) => Promise<T>

  constructor(
    takeover: boolean,
    record: IdempotencyRecord | undefined,
    session: StoreTransaction<TTransaction>,
  ) {
    super(takeover, record)
    this.tx = session.handle
    this.savepoint = (fn) => session.savepoint((inner) => fn(inner.handle))
  }
}

/**
 * A lease of transactional mode. The record was written by this transaction and nobody else
 * sees it before the commit, so nobody can take it over: completion cannot lose the lease.
 */
export class TransactionalLease<TTransaction> extends LeaseInTransaction<TTransaction> {
  readonly #context: EngineContext<TTransaction>
  readonly #claim: HeldClaim<TTransaction>
  readonly #ttl: number
  readonly #base: EventBase
  readonly #openedBefore: number
  readonly #startedAt: number

  constructor(
    context: EngineContext<TTransaction>,
    claim: HeldClaim<TTransaction>,
    ttl: number,
    base: EventBase,
    openedBefore: number,
  ) {
    // The handler writes in the savepoint.
    super(claim.takeover, claim.record, claim.savepoint.session)
    this.#context = context
    this.#claim = claim
    this.#ttl = ttl
    this.#base = base
    this.#openedBefore = openedBefore
    this.#startedAt = context.now()
  }

  protected settle(outcome: Outcome | undefined): Promise<void> {
    const settling = outcome === undefined ? this.#rollBack() : this.#finish(outcome)
    const { trace } = this.#base
    return trace === undefined ? settling : trace.settled(settling)
  }

  /** Releases the key: the claim is rolled back with the handler's writes. */
  async #rollBack(): Promise<void> {
    const { held, savepoint } = this.#claim
    // The savepoint first: the transaction's callback is parked inside it.
    await bounded(savepoint.rollback(), this.#context.releaseTimeout, 'release').catch(
      () => undefined,
    )
    await rollbackQuietly(this.#context, held, this.#base)
    emit(this.#context, this.#base, 'released')
  }

  /**
   * Ends the handler's savepoint (keeping its writes with a value, dropping them with a
   * recorded error), records the outcome, commits.
   */
  async #finish(outcome: Outcome): Promise<void> {
    const context = this.#context
    const base = this.#base
    const { held, savepoint, record } = this.#claim
    const response = encodeOutcome(context, outcome, base)
    let ok = false
    const committing = { sent: false }
    const recordAndCommit = async () => {
      // A transaction whose connection closed meanwhile takes no more statements.
      if (!(await held.open())) throw new TransactionEndedError()
      if (outcome.ok) await savepoint.commit()
      else await savepoint.rollback()
      ok = await held.session.complete({
        scope: record.scope,
        key: record.key,
        leaseToken: record.leaseToken,
        response,
        ttlMs: this.#ttl,
      })
      // Only the handler itself could have changed the record this transaction holds.
      if (!ok) {
        emit(context, base, 'lost-lease')
        context.logger.warn(
          `the record of operation ${base.operation} changed inside its own transaction; the outcome was not recorded`,
        )
      }
      committing.sent = true
      await held.commit()
    }
    const recording = () => bounded(recordAndCommit(), context.commitTimeout, 'commit')
    try {
      await (base.trace === undefined ? recording() : base.trace.complete(recording))
    } catch (error) {
      throw commitFailed(context, held, base, committing.sent, error)
    }
    // Committed: the record is there for everyone now. Its expiry is counted from a time in
    // the transaction (the Drizzle store: its completing statement), so from before the
    // transaction began a copy cannot outlive it, whatever clock a store uses in there.
    if (ok) {
      const { scope, key, fingerprint } = record
      context.replayCache?.add(scope, key, fingerprint, response, this.#openedBefore, this.#ttl)
    }
    if (context.onEvent) {
      emit(context, base, 'executed', { durationMs: context.now() - this.#startedAt })
    }
  }
}

/** The lease of transactional mode without a record: completing it commits, anything else rolls back. */
export class RecordlessLease<TTransaction> extends LeaseInTransaction<TTransaction> {
  readonly #context: EngineContext<TTransaction>
  readonly #held: HeldTransaction<TTransaction>
  readonly #base: EventBase

  constructor(
    context: EngineContext<TTransaction>,
    held: HeldTransaction<TTransaction>,
    base: EventBase,
  ) {
    super(false, undefined, held.session)
    this.#context = context
    this.#held = held
    this.#base = base
  }

  protected async settle(outcome: Outcome | undefined): Promise<void> {
    // Nothing to record, so a failure of any kind drops the handler's writes.
    if (outcome?.ok !== true) return rollbackQuietly(this.#context, this.#held, this.#base)
    try {
      await bounded(this.#held.commit(), this.#context.commitTimeout, 'commit')
    } catch (error) {
      throw commitFailed(this.#context, this.#held, this.#base, true, error)
    }
  }
}

export async function rollbackQuietly<TTransaction>(
  context: EngineContext<TTransaction>,
  held: HeldTransaction<TTransaction>,
  base: EventBase,
): Promise<void> {
  try {
    // Bounded: a ROLLBACK on a stalled connection (or one a driver never sends) must not hold
    // the answer; the database rolls back by itself when the connection goes.
    await bounded(held.rollback(), context.releaseTimeout, 'release')
  } catch (error) {
    // The database rolls an unfinished transaction back by itself when its connection goes.
    context.logger.error(
      `could not roll back the transaction of operation ${base.operation}`,
      error,
    )
  }
}

/**
 * The error a caller gets when a transaction did not confirm its COMMIT. Nothing committed
 * when the COMMIT was never sent, or the database refused it (a SQLSTATE): 503
 * `STORE_UNAVAILABLE`, and a retry runs cleanly. A COMMIT sent whose answer was lost (the
 * connection reset) or did not come within `commitTimeout` may have committed: 503
 * `OUTCOME_UNKNOWN`, and a retry with the same key replays it or runs it, whichever is true.
 */
function commitFailed<TTransaction>(
  context: EngineContext<TTransaction>,
  held: HeldTransaction<TTransaction>,
  base: EventBase,
  commitSent: boolean,
  error: unknown,
): Error {
  // Not awaited: a stalled connection would hold the answer; the rollback lands when it can,
  // and one that cannot is the database's to do when the connection goes.
  void rollbackQuietly(context, held, base)
  const known = !commitSent || error instanceof TransactionEndedError || answeredByDatabase(error)
  // A transaction without a record (no key) has no keyed operation to report.
  const keyed = base.key !== ''
  if (known) {
    if (keyed) {
      emit(context, base, 'store-error', { stage: 'complete', error, code: 'STORE_UNAVAILABLE' })
    }
    context.logger.error(
      `the transaction of operation ${base.operation} did not commit; nothing was recorded and its writes were rolled back`,
      error,
    )
    return new StoreUnavailableError({ cause: error })
  }
  if (keyed)
    emit(context, base, 'outcome-unknown', { stage: 'commit', error, code: 'OUTCOME_UNKNOWN' })
  context.logger.error(
    `the COMMIT of operation ${base.operation} was sent but not confirmed; it may have been applied`,
    error,
  )
  return new OutcomeUnknownError(retryAfterSeconds(context.retryAfter), { cause: error })
}
