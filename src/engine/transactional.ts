/**
 * Transactional mode: the record is claimed in a transaction of the store that stays open while
 * the handler writes (in a savepoint of it), and the outcome is recorded and committed with the
 * handler's writes, or rolled back with them. The record is invisible to everyone else until the
 * COMMIT, and by then it is completed. The statements are in
 * src/stores/drizzle/postgres/transactional.ts; the leases in ./transactional-lease.ts.
 */
import { StoreUnavailableError } from '../errors'
import type { ClaimInput, ClaimResult, StoreTransaction, TransactionClaimResult } from '../store'
import { type HeldTransaction, holdTransaction } from '../transaction'
import { bounded } from './bounded'
import { type EngineContext, type EventBase, emit } from './context'
import { RecordlessLease, rollbackQuietly, TransactionalLease } from './transactional-lease'
import type { Lease } from './types'

export type TransactionalClaim<TTransaction> =
  /** Claimed: the transaction and the savepoint the handler writes in are open in `lease`. */
  | { kind: 'claimed'; lease: Lease<TTransaction> }
  /** Refused or interrupted; the transaction is already rolled back (it wrote nothing). */
  | { kind: 'refused'; result: Exclude<TransactionClaimResult, { claimed: true }> }
  /** The store failed: the claim path decides what then happens (`onStoreError`). */
  | { kind: 'failed'; error: unknown }

/**
 * The claim of transactional mode, in a transaction of the store that stays open for the
 * handler when the claim wins.
 */
export async function claimInTransaction<TTransaction>(
  context: EngineContext<TTransaction>,
  input: ClaimInput,
  lockWaitMs: number,
  base: EventBase,
  ttl: number,
  /** On the engine's clock, a time before the transaction began. */
  openedBefore: number,
): Promise<TransactionalClaim<TTransaction>> {
  const { claimTimeout } = context
  let held: HeldTransaction<TTransaction>
  try {
    held = await openTransaction(context, base)
  } catch (error) {
    return { kind: 'failed', error }
  }
  let result: TransactionClaimResult
  let savepoint: HeldTransaction<TTransaction> | undefined
  try {
    const waitMs = Math.max(1, lockWaitMs)
    // The handler writes in a savepoint, so a recorded error can drop its writes and keep the
    // claim that records it. Where the store can, it is opened right behind the claim's first
    // statement, in the same round trip (a refused claim's transaction rolls back with it).
    let early: Promise<HeldTransaction<TTransaction>> | undefined
    const claiming = held.session.claim(input, {
      lockWaitMs: waitMs,
      afterFirstStatement: () => {
        early = savepointIn(held)
        early.catch(() => {})
      },
    })
    // The claim's own lock wait is part of the answer; the bound comes on top of it.
    result = await bounded(
      claiming,
      claimTimeout === undefined ? undefined : claimTimeout + waitMs,
      'claim',
    )
    // Bounded as the claim is: on a connection that stalls (or a driver that never sends the
    // statement) the request must not wait for ever.
    if (result.claimed) {
      const later = result.laterStatements === true
      savepoint = await bounded(handlerSavepoint(held, early, later), claimTimeout, 'claim')
    }
  } catch (error) {
    // Not awaited: a stalled connection ends the transaction when it can.
    void rollbackQuietly(context, held, base)
    return { kind: 'failed', error }
  }
  if (result.claimed && savepoint) {
    const won: Extract<ClaimResult, { claimed: true }> = result
    if (won.takeover) emit(context, base, 'takeover')
    const lease = new TransactionalLease(
      context,
      { held, savepoint, record: won.record, takeover: won.takeover },
      ttl,
      base,
      openedBefore,
    )
    return { kind: 'claimed', lease }
  }
  // A refused claim wrote nothing; ending its transaction now frees the connection at once.
  await rollbackQuietly(context, held, base)
  return { kind: 'refused', result: result as Exclude<TransactionClaimResult, { claimed: true }> }
}

const savepointIn = <TTransaction>(parent: HeldTransaction<TTransaction>) =>
  holdTransaction((fn) => parent.session.savepoint(fn), parent)

/**
 * The savepoint the handler writes in: the one opened behind the claim's first statement
 * (`early`), or a new one. When the claim sent more statements after `early` opened, the
 * handler gets a savepoint nested in it, so that dropping its writes keeps the claim; `early`
 * ends with it, keeping what it holds.
 */
async function handlerSavepoint<TTransaction>(
  held: HeldTransaction<TTransaction>,
  early: Promise<HeldTransaction<TTransaction>> | undefined,
  laterStatements: boolean,
): Promise<HeldTransaction<TTransaction>> {
  if (early === undefined) return savepointIn(held)
  const outer = await early
  if (!laterStatements) return outer
  const inner = await savepointIn(outer)
  // Ends once, as a HeldTransaction does: a rollback after the commit has nothing left to do.
  let ending: Promise<void> | undefined
  const end = (commit: boolean) => {
    ending ??= (commit ? inner.commit() : inner.rollback()).then(() => outer.commit())
    return ending
  }
  return {
    ...inner,
    commit: () => end(true),
    rollback: () => (ending === undefined ? end(false) : ending.catch(() => undefined)),
  }
}

/**
 * Transactional mode without a record (no key, or the store failed open): the handler still
 * gets a transaction to write with, so its code does not branch on the key.
 */
export async function recordlessLease<TTransaction>(
  context: EngineContext<TTransaction>,
  operation: string,
): Promise<Lease<TTransaction>> {
  const base = { operation, scope: '', key: '' }
  let held: HeldTransaction<TTransaction>
  try {
    held = await openTransaction(context, base)
  } catch (error) {
    context.logger.error(`could not open a transaction for operation ${operation}`, error)
    throw new StoreUnavailableError({ cause: error })
  }
  return new RecordlessLease(context, held, base)
}

/**
 * Opens a transaction of the store and holds it open, within `claimTimeout`: a pool that hands
 * out no connection (all held, or the database unreachable) must not hold the request for ever.
 */
async function openTransaction<TTransaction>(
  context: EngineContext<TTransaction>,
  base: EventBase,
): Promise<HeldTransaction<TTransaction>> {
  const opening = holdTransaction<TTransaction>((fn) => storeTransaction(context, fn))
  try {
    return await bounded(opening, context.claimTimeout, 'claim')
  } catch (error) {
    // A transaction that opens after its bound has no one to use it.
    opening.then((late) => rollbackQuietly(context, late, base)).catch(() => {})
    throw error
  }
}

function storeTransaction<TTransaction>(
  context: EngineContext<TTransaction>,
  fn: (session: StoreTransaction<TTransaction>) => Promise<void>,
): Promise<void> {
  const { store } = context
  // Checked when transactional mode was asked for; this keeps the type checker informed.
  if (!store.transaction)
    throw new TypeError('idempotent-mutations: the store has no transaction()')
  return store.transaction(fn)
}
