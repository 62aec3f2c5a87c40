/**
 * The claim path: from an operation request to an attempt (`bypass`, `replay` or `execute` with
 * a lease). The record's life is drawn in ../store.ts; a claim finds the key in one of its
 * states, and each refusal below says why it answers as it does.
 *
 *   begin ── no key ─────────────────────────────── bypass (or, transactional, a recordless lease)
 *     └─ keyedCall ─ replay cache copy ──────────── replay / 422
 *          └─ claimKey: claim (store, or in a transaction) ─ won ─ execute (a lease)
 *               ├─ store failed ─── 503 (fail-closed) / bypass or recordless lease (fail-open)
 *               ├─ completed, or another payload ── replay / 422 (refusalAnswer)
 *               └─ in progress ─── wait and claim again (`wait`), else 409
 */
import { toMilliseconds } from '../duration'
import {
  InProgressError,
  KeyRequiredError,
  KeyReusedError,
  ResponseNotStoredError,
  StoreUnavailableError,
} from '../errors'
import { fingerprint as fingerprintOf } from '../fingerprint'
import { validateKey } from '../key'
import { storedScope } from '../scope'
import type { ClaimInput, ClaimResult, IdempotencyRecord, TransactionClaimResult } from '../store'
import { bounded } from './bounded'
import { type EngineContext, type EventBase, emit, retryAfterSeconds } from './context'
import { StoreLease } from './lease'
import { assertTransactionalStore } from './options'
import { decodeOutcome } from './outcome'
import { newLeaseToken } from './token'
import { claimInTransaction, recordlessLease } from './transactional'
import type { Attempt, OperationRequest } from './types'

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))
// A claim the database refused for a concurrent change runs again in a new transaction, a few
// times: the change it collided with has committed by then.
const maxSerializationRetries = 5

/** A keyed request, checked, with the engine's options applied. */
interface KeyedCall {
  /** The stored scope (caller and operation). */
  readonly scope: string
  readonly key: string
  readonly fingerprint: string
  readonly ttl: number
  readonly lockTimeout: number
  readonly concurrency: 'reject' | 'wait'
  readonly waitTimeout: number
  readonly base: EventBase
}

/** A claim another record refused (`record`), or a transactional claim interrupted. */
type Refused = Exclude<TransactionClaimResult, { claimed: true }>

/** The engine's `begin`: what to do with one operation request. */
export async function begin<TTransaction>(
  context: EngineContext<TTransaction>,
  request: OperationRequest,
): Promise<Attempt<TTransaction>> {
  const inTransaction = request.transactional ?? context.transactional
  if (inTransaction && !context.transactional) {
    assertTransactionalStore(context.store, 'a request with `transactional: true`')
  }
  if (request.key === undefined || request.key === null) {
    if (request.required ?? context.required) throw new KeyRequiredError()
    if (inTransaction) {
      return { kind: 'execute', lease: await recordlessLease(context, request.operation) }
    }
    return { kind: 'bypass', reason: 'no-key' }
  }
  const call = keyedCall(context, request, request.key)
  const { trace } = call.base
  const claiming = claimKey(context, call, inTransaction)
  return trace === undefined ? claiming : trace.claimed(claiming)
}

function keyedCall(
  context: EngineContext<unknown>,
  request: OperationRequest,
  requestKey: string,
): KeyedCall {
  const key = validateKey(requestKey)
  const ttl = request.ttl === undefined ? context.ttl : toMilliseconds(request.ttl, 'ttl')
  const lockTimeout =
    request.lockTimeout === undefined
      ? context.lockTimeout
      : toMilliseconds(request.lockTimeout, 'lockTimeout')
  const waitTimeout =
    request.waitTimeout === undefined
      ? context.waitTimeout
      : toMilliseconds(request.waitTimeout, 'waitTimeout')
  const callerScope = request.scope ?? ''
  const { operation } = request
  return {
    // The stored scope joins caller and operation unambiguously: the same key from two tenants
    // or on two operations names two unrelated records.
    scope: scopeOf(context, callerScope, operation),
    key,
    fingerprint: request.fingerprint ?? fingerprintOf(request.payload),
    ttl,
    lockTimeout,
    concurrency: request.concurrency ?? context.concurrency,
    waitTimeout,
    base: {
      operation,
      scope: callerScope,
      key,
      trace: context.telemetry?.start(operation, key, request.adapter),
    },
  }
}

/** {@link storedScope}, kept per operation for callers without a scope of their own. */
function scopeOf(context: EngineContext<unknown>, callerScope: string, operation: string) {
  if (callerScope !== '') return storedScope({ scope: callerScope, operation })
  const { sharedScopes } = context
  let scope = sharedScopes.get(operation)
  if (scope === undefined) {
    if (sharedScopes.size >= 1024) sharedScopes.clear()
    scope = storedScope({ operation })
    sharedScopes.set(operation, scope)
  }
  return scope
}

/**
 * One claim attempt's input. A fresh token per attempt: a waiter that claims after a release
 * holds its own lease.
 */
function newClaimInput(call: KeyedCall): ClaimInput {
  const { scope, key, fingerprint, lockTimeout, ttl } = call
  // An unfinished claim lives at least as long as its lease.
  const ttlMs = Math.max(ttl, lockTimeout)
  return { scope, key, fingerprint, leaseToken: newLeaseToken(), lockTimeoutMs: lockTimeout, ttlMs }
}

/** Claims the key until this caller holds it, a record answers, or the wait is over. */
async function claimKey<TTransaction>(
  context: EngineContext<TTransaction>,
  call: KeyedCall,
  inTransaction: boolean,
): Promise<Attempt<TTransaction>> {
  const { replayCache, now } = context
  // The clock is read before the claim only for what uses the time: the replay cache, a wait's
  // deadline, a transaction's start (a first claim in `reject` mode with neither needs none).
  let askedAt = replayCache || inTransaction || call.concurrency === 'wait' ? now() : 0
  const copy = replayCache?.get(call.scope, call.key, askedAt)
  if (copy) return refusalAnswer(context, copy, call) as Attempt<TTransaction>
  const deadline = askedAt + call.waitTimeout
  let pause = 20
  let serializationRetries = 0
  for (; ; askedAt = now()) {
    const claim = inTransaction
      ? await claimOnceInTransaction(context, call, deadline, askedAt)
      : await claimOnceInStore(context, call)
    if ('kind' in claim) return claim
    if ('interrupted' in claim) {
      // A concurrency failure of the database: the change it met has committed, so a new
      // transaction's claim sees it (and usually replays it).
      const retry =
        claim.interrupted === 'serialization' &&
        ++serializationRetries <= maxSerializationRetries &&
        (call.concurrency === 'reject' || now() < deadline)
      if (retry) continue
      // The first transaction is still running after the wait we allow: like a valid lease,
      // but its end cannot be read from a record, so Retry-After is the default.
      throw inProgress(context, call.base, context.retryAfter)
    }
    const { record } = claim
    if (replayCache && record.status === 'completed') {
      // The store read its clock after `askedAt`, so the copy ends no later than the record.
      // Less a millisecond: stores read their clock in whole milliseconds, rounded down, so
      // the true time left can be up to one short of the difference.
      const left = record.expiresAt - claim.now - 1
      replayCache.add(call.scope, call.key, record.fingerprint, record.response, askedAt, left)
    }
    const answer = refusalAnswer<TTransaction>(context, record, call)
    if (answer) return answer
    // In progress under a valid lease: someone else is running it right now (in transactional
    // mode, a non-transactional executor of the same key: its claim committed on its own).
    const leaseLeft = Math.max(0, record.lockedUntil - claim.now)
    const remaining = call.concurrency === 'wait' ? deadline - now() : 0
    if (remaining > 0) {
      call.base.trace?.waiting()
      await sleep(Math.min(pause, remaining, Math.max(leaseLeft, 1)))
      pause = Math.min(pause * 1.5, 250)
      continue
    }
    throw inProgress(context, call.base, Math.min(context.retryAfter, leaseLeft))
  }
}

/** One claim in the store: a lease, the record that refused it, or (store failed open) bypass. */
async function claimOnceInStore<TTransaction>(
  context: EngineContext<TTransaction>,
  call: KeyedCall,
): Promise<Attempt<TTransaction> | Refused> {
  const { trace } = call.base
  const claiming = () =>
    bounded(context.store.claim(newClaimInput(call)), context.claimTimeout, 'claim')
  let result: ClaimResult
  try {
    result = await (trace === undefined ? claiming() : trace.claim(claiming))
  } catch (error) {
    claimFailed(context, call.base, error)
    return { kind: 'bypass', reason: 'store-unavailable' }
  }
  if (!result.claimed) return result
  if (result.takeover) emit(context, call.base, 'takeover')
  const { record, takeover } = result
  const { ttl, lockTimeout, base } = call
  const lease = new StoreLease(context, record, takeover, ttl, lockTimeout, base, context.now())
  return { kind: 'execute', lease }
}

/** One claim in a transaction of the store (./transactional.ts). */
async function claimOnceInTransaction<TTransaction>(
  context: EngineContext<TTransaction>,
  call: KeyedCall,
  deadline: number,
  askedAt: number,
): Promise<Attempt<TTransaction> | Refused> {
  const lockWaitMs = call.concurrency === 'wait' ? deadline - context.now() : context.rejectAfter
  const input = newClaimInput(call)
  const { base, ttl } = call
  const claiming = () => claimInTransaction(context, input, lockWaitMs, base, ttl, askedAt)
  const claim = await (base.trace === undefined
    ? claiming()
    : base.trace.claim(claiming, (claimed) =>
        claimed.kind === 'failed' ? claimed.error : undefined,
      ))
  if (claim.kind === 'claimed') return { kind: 'execute', lease: claim.lease }
  if (claim.kind === 'refused') return claim.result
  claimFailed(context, call.base, claim.error)
  // Failing open, the keyed operation ends here (`store_error`), as it does outside
  // transactional mode: the handler runs without a record, in a transaction of its own.
  call.base.trace?.end(undefined)
  return { kind: 'execute', lease: await recordlessLease(context, call.base.operation) }
}

/** A claim the store could not answer: 503, or (fail-open) running without a record. */
function claimFailed(context: EngineContext<unknown>, base: EventBase, error: unknown): void {
  const failClosed = context.onStoreError === 'fail-closed'
  // Failing open, the caller gets no error: the event carries no code.
  const details = { stage: 'claim', error } as const
  emit(
    context,
    base,
    'store-error',
    failClosed ? { ...details, code: 'STORE_UNAVAILABLE' } : details,
  )
  context.logger.error(`claim failed for operation ${base.operation}`, error)
  if (failClosed) throw new StoreUnavailableError({ cause: error })
}

/**
 * A refused claim whose record is not in progress, or not ours to wait for: 422 for another
 * payload, a replay of a completed record. Returns undefined for an in-progress record.
 */
function refusalAnswer<TTransaction>(
  context: EngineContext<unknown>,
  record: Pick<IdempotencyRecord, 'fingerprint' | 'status' | 'response'>,
  call: KeyedCall,
): Attempt<TTransaction> | undefined {
  // Same key, other payload: a client bug, whatever state the record is in.
  if (record.fingerprint !== call.fingerprint) {
    emit(context, call.base, 'mismatch', { code: 'KEY_REUSED' })
    throw new KeyReusedError()
  }
  if (record.status !== 'completed') return undefined
  // Completed without a body (too large, not serializable): it ran, and cannot be replayed.
  if (record.response === null) throw new ResponseNotStoredError()
  const outcome = decodeOutcome(context, record.response, call.base)
  emit(context, call.base, 'replayed')
  return { kind: 'replay', outcome }
}

/** 409: the operation is running under a lease for another `retryAfterMs` at most. */
function inProgress(context: EngineContext<unknown>, base: EventBase, retryAfterMs: number) {
  emit(context, base, 'conflict', { code: 'IN_PROGRESS' })
  return new InProgressError(retryAfterSeconds(retryAfterMs))
}
