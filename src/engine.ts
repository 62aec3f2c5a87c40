import { randomFillSync } from 'node:crypto'
import { toMilliseconds } from './duration'
import { bounded } from './engine/bounded'
import {
  createEngineContext,
  type EventBase,
  type EventDetails,
  emit as emitEvent,
} from './engine/context'
import { StoreLease, unkeyedContext } from './engine/lease'
import { assertTransactionalStore, type IdempotencyOptions } from './engine/options'
import { decodeOutcome, defaultDeserializeError, defaultSerializeError } from './engine/outcome'
import { claimInTransaction, recordlessLease } from './engine/transactional'
import type {
  Attempt,
  ExecuteRequest,
  ExecuteResult,
  HandlerContext,
  Idempotency,
  IdempotencyEventType,
  OperationRequest,
} from './engine/types'
import {
  InProgressError,
  KeyRequiredError,
  KeyReusedError,
  ResponseNotStoredError,
  StoreUnavailableError,
} from './errors'
import { fingerprint as fingerprintOf } from './fingerprint'
import { validateKey } from './key'
import type { ReplayCopy } from './replay-cache'
import type { ClaimInput, ClaimResult, IdempotencyRecord } from './store'

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))
// A claim the database refused for a concurrent change runs again in a new transaction, a few
// times: the change it collided with has committed by then.
const maxSerializationRetries = 5

// Lease tokens are random (SPEC): 128 bits, written as 22 base64url characters. The bytes come
// from the CSPRNG 256 tokens at a time, as Node's `randomUUID` takes its own 128 UUIDs at a time:
// a token is then one string read from the pool, where `randomUUID` joins twenty pieces into its
// text (about 800 bytes of garbage on every keyed call, and a memory store keeps the result).
const tokenBytes = 16
const tokenPool = Buffer.alloc(tokenBytes * 256)
let tokenOffset = tokenPool.length

/**
 * A fresh random lease token. Random, not a per-process prefix and a counter, which two processes
 * started from one memory snapshot would share for good (a shared token defeats fencing); like
 * `randomUUID`'s cache, only the rest of the pool filled before a snapshot is shared.
 */
function newLeaseToken(): string {
  if (tokenOffset === tokenPool.length) {
    randomFillSync(tokenPool)
    tokenOffset = 0
  }
  const token = tokenPool.toString('base64url', tokenOffset, tokenOffset + tokenBytes)
  tokenOffset += tokenBytes
  return token
}

/**
 * One claim attempt's input. A fresh token per attempt: a waiter that claims after a release
 * holds its own lease. A module function rather than a closure in `begin`, which would be one
 * more allocation on every keyed call.
 */
function newClaimInput(
  scope: string,
  key: string,
  fingerprint: string,
  lockTimeoutMs: number,
  ttlMs: number,
): ClaimInput {
  return { scope, key, fingerprint, leaseToken: newLeaseToken(), lockTimeoutMs, ttlMs }
}

export function createIdempotency<TTransaction = unknown>(
  options: IdempotencyOptions<TTransaction>,
): Idempotency<TTransaction> {
  const context = createEngineContext(options)
  const { store, transactional, onStoreError, now, logger, background } = context
  const { claimTimeout, replayCache } = context
  const defaults = context
  const engineStoreErrors = context.storeErrors
  const emit = (base: EventBase, type: IdempotencyEventType, details?: EventDetails) =>
    emitEvent(context, base, type, details)

  /**
   * A refused claim whose record is not in progress, or not ours to wait for: 422 for another
   * payload, a replay of a completed record. Returns undefined for an in-progress record.
   */
  function answerRefusal(
    record: Pick<IdempotencyRecord, 'fingerprint' | 'status' | 'response'>,
    fingerprint: string,
    base: EventBase,
  ): Attempt<TTransaction> | undefined {
    // Same key, other payload: a client bug, whatever state the record is in.
    if (record.fingerprint !== fingerprint) {
      emit(base, 'mismatch')
      throw new KeyReusedError()
    }
    if (record.status === 'completed') {
      if (record.response === null) throw new ResponseNotStoredError()
      const outcome = decodeOutcome(context, record.response, base)
      emit(base, 'replayed')
      return { kind: 'replay', outcome }
    }
    return undefined
  }

  /** A claim the store could not answer: 503, or (fail-open) running without a record. */
  function claimFailed(base: EventBase, error: unknown): void {
    emit(base, 'store-error', { stage: 'claim', error })
    logger.error(`claim failed for operation ${base.operation}`, error)
    if (onStoreError === 'fail-closed') throw new StoreUnavailableError({ cause: error })
  }

  // The stored scope of the shared scope ('') per operation: the JSON below on every keyed call
  // costs more than a lookup, and most calls use a few operations. Bounded by clearing.
  const sharedScopes = new Map<string, string>()
  function storedScope(callerScope: string, operation: string): string {
    if (callerScope !== '') return JSON.stringify([callerScope, operation])
    let scope = sharedScopes.get(operation)
    if (scope === undefined) {
      if (sharedScopes.size >= 1024) sharedScopes.clear()
      scope = JSON.stringify(['', operation])
      sharedScopes.set(operation, scope)
    }
    return scope
  }

  async function begin(request: OperationRequest): Promise<Attempt<TTransaction>> {
    const required = request.required ?? defaults.required
    const callerScope = request.scope ?? ''
    const inTransaction = request.transactional ?? transactional
    if (inTransaction && !transactional) {
      assertTransactionalStore(store, 'a request with `transactional: true`')
    }
    if (request.key === undefined || request.key === null) {
      if (required) throw new KeyRequiredError()
      if (inTransaction) {
        return { kind: 'execute', lease: await recordlessLease(context, request.operation) }
      }
      return { kind: 'bypass', reason: 'no-key' }
    }
    const key = validateKey(request.key)
    const ttl = request.ttl === undefined ? defaults.ttl : toMilliseconds(request.ttl, 'ttl')
    const lockTimeout =
      request.lockTimeout === undefined
        ? defaults.lockTimeout
        : toMilliseconds(request.lockTimeout, 'lockTimeout')
    const concurrency = request.concurrency ?? defaults.concurrency
    const waitTimeout =
      request.waitTimeout === undefined
        ? defaults.waitTimeout
        : toMilliseconds(request.waitTimeout, 'waitTimeout')
    // The stored scope joins caller and operation unambiguously: the same key from two tenants
    // or on two operations names two unrelated records.
    const scope = storedScope(callerScope, request.operation)
    const fingerprint = request.fingerprint ?? fingerprintOf(request.payload)
    const base = { operation: request.operation, scope: callerScope, key }

    // An unfinished claim lives at least as long as its lease.
    const claimTtl = Math.max(ttl, lockTimeout)

    // The clock is read before the claim only for what uses the time: the replay cache, a wait's
    // deadline, a transaction's start (a first claim in `reject` mode with neither needs none).
    let askedAt = replayCache || inTransaction || concurrency === 'wait' ? now() : 0
    if (replayCache) {
      const copy: ReplayCopy | undefined = replayCache.get(scope, key, askedAt)
      if (copy) return answerRefusal(copy, fingerprint, base) as Attempt<TTransaction>
    }
    const deadline = askedAt + waitTimeout
    let pause = 20
    let serializationRetries = 0
    for (; ; askedAt = now()) {
      let result: ClaimResult
      if (inTransaction) {
        const lockWaitMs = concurrency === 'wait' ? deadline - now() : defaults.rejectAfter
        const claim = await claimInTransaction(
          context,
          newClaimInput(scope, key, fingerprint, lockTimeout, claimTtl),
          lockWaitMs,
          base,
          ttl,
          askedAt,
        )
        if (claim.kind === 'failed') {
          claimFailed(base, claim.error)
          return { kind: 'execute', lease: await recordlessLease(context, request.operation) }
        }
        if (claim.kind === 'claimed') return { kind: 'execute', lease: claim.lease }
        if ('interrupted' in claim.result) {
          // A concurrency failure of the database: the change it met has committed, so a new
          // transaction's claim sees it (and usually replays it).
          const retry =
            claim.result.interrupted === 'serialization' &&
            ++serializationRetries <= maxSerializationRetries &&
            (concurrency === 'reject' || now() < deadline)
          if (retry) continue
          // The first transaction is still running after the wait we allow: like a valid
          // lease, but its end cannot be read from a record, so Retry-After is the default.
          emit(base, 'conflict')
          throw new InProgressError(Math.max(1, Math.ceil(defaults.retryAfter / 1000)))
        }
        result = claim.result
      } else {
        try {
          const claiming = store.claim(
            newClaimInput(scope, key, fingerprint, lockTimeout, claimTtl),
          )
          result = await bounded(claiming, claimTimeout, 'claim')
        } catch (error) {
          claimFailed(base, error)
          return { kind: 'bypass', reason: 'store-unavailable' }
        }
      }
      if (result.claimed) {
        if (result.takeover) emit(base, 'takeover')
        return {
          kind: 'execute',
          lease: new StoreLease(
            context,
            result.record,
            result.takeover,
            ttl,
            lockTimeout,
            base,
            now(),
          ),
        }
      }
      const { record } = result
      if (replayCache && record.status === 'completed') {
        // The store read its clock after `askedAt`, so the copy ends no later than the record.
        replayCache.add(
          scope,
          key,
          record.fingerprint,
          record.response,
          askedAt,
          // Less a millisecond: stores read their clock in whole milliseconds, rounded down, so
          // the true time left can be up to one short of the difference.
          record.expiresAt - result.now - 1,
        )
      }
      const answer = answerRefusal(record, fingerprint, base)
      if (answer) return answer
      // In progress under a valid lease: someone else is running it right now (in transactional
      // mode, a non-transactional executor of the same key: its claim committed on its own).
      const leaseLeft = Math.max(0, record.lockedUntil - result.now)
      const remaining = concurrency === 'wait' ? deadline - now() : 0
      if (remaining > 0) {
        await sleep(Math.min(pause, remaining, Math.max(leaseLeft, 1)))
        pause = Math.min(pause * 1.5, 250)
        continue
      }
      emit(base, 'conflict')
      throw new InProgressError(
        Math.max(1, Math.ceil(Math.min(defaults.retryAfter, leaseLeft) / 1000)),
      )
    }
  }

  async function execute<T>(
    request: ExecuteRequest,
    handler: (context: HandlerContext<TTransaction>) => T | Promise<T>,
  ): Promise<ExecuteResult<T>> {
    const attempt = await begin(request)
    if (attempt.kind === 'bypass') {
      return { value: await handler(unkeyedContext), replayed: false }
    }
    if (attempt.kind === 'replay') {
      const { outcome } = attempt
      if (outcome.ok) return { value: outcome.value as T, replayed: true }
      throw (request.deserializeError ?? defaultDeserializeError)(outcome.error)
    }
    const { lease } = attempt
    let value: T
    try {
      value = await handler(lease)
    } catch (error) {
      let errorData: unknown
      let recorded = false
      try {
        recorded = (request.storeErrors ?? engineStoreErrors)(error)
        if (recorded) errorData = (request.serializeError ?? defaultSerializeError)(error)
      } catch (policyError) {
        // A throwing policy must not leave the lease (in transactional mode, a transaction
        // and its connection) unsettled: the key is released, and the handler's error stands.
        logger.error(
          `storeErrors or serializeError threw for operation ${request.operation}`,
          policyError,
        )
        recorded = false
      }
      if (recorded) await lease.completeWithError(errorData)
      else await lease.release()
      throw error
    }
    await lease.complete(value)
    return { value, replayed: false }
  }

  const sweepEvery = context.sweepInterval
  // A store without a clock of its own (the memory store) follows the engine's, Date.now
  // included; last, so that an engine refused for a bad option leaves the store untouched.
  store.useClock?.(now)
  // One sweep at a time: a backlog that outlasts the interval is not swept twice at once.
  let sweeping = false
  const timer =
    sweepEvery === undefined
      ? undefined
      : setInterval(() => {
          if (sweeping) return
          sweeping = true
          store
            .sweep()
            .catch((error) => logger.error('sweep failed', error))
            .finally(() => {
              sweeping = false
            })
        }, sweepEvery)
  timer?.unref()

  return {
    // The transactional overload differs only in its handler's type: a handler that needs
    // `tx` runs with a transactional request, which hands it one.
    execute: execute as Idempotency<TTransaction>['execute'],
    begin,
    sweep: () => store.sweep(),
    drain: () => background.drain(),
    close: () => {
      clearInterval(timer)
      background.close()
    },
    store,
    transactional,
    required: defaults.required,
  }
}
