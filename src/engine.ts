import { randomUUID } from 'node:crypto'
import { type Codec, defaultCodec, fingerprint as fingerprintOf, hashParts } from './codec'
import { type Duration, toMilliseconds } from './duration'
import {
  InProgressError,
  KeyRequiredError,
  KeyReusedError,
  ResponseNotStoredError,
  StoreUnavailableError,
} from './errors'
import { validateKey } from './key'
import type { ClaimResult, IdempotencyRecord, IdempotencyStore } from './store'

export type IdempotencyEventType =
  | 'executed'
  | 'replayed'
  | 'conflict'
  | 'mismatch'
  | 'released'
  | 'takeover'
  | 'lost-lease'
  | 'store-error'
  | 'not-stored'

export interface IdempotencyEvent {
  type: IdempotencyEventType
  operation: string
  /** The caller's scope as the adapter or caller gave it ('' when none). */
  scope: string
  key: string
  /** For `executed`: how long the handler ran, in milliseconds. */
  durationMs?: number
  /** For `store-error`: which store call failed. */
  stage?: 'claim' | 'complete' | 'release'
  /** For `store-error` and `not-stored`: what went wrong. */
  error?: unknown
}

export interface Logger {
  warn(message: string, ...details: unknown[]): void
  error(message: string, ...details: unknown[]): void
}

const logPrefix = '[idempotent-mutations]'

/** Writes warnings and errors to the console under a fixed prefix. */
export const defaultLogger: Logger = {
  warn: (message, ...details) => console.warn(`${logPrefix} ${message}`, ...details),
  error: (message, ...details) => console.error(`${logPrefix} ${message}`, ...details),
}

/**
 * The engine's default failure policy: an error that carries an HTTP-like `status` (or
 * `statusCode`) in 4xx, other than 408, 409 and 429, is deterministic and recorded; anything
 * else releases the key so a retry can run again.
 */
export function defaultStoreErrors(error: unknown): boolean {
  if (error === null || typeof error !== 'object') return false
  const { status, statusCode } = error as { status?: unknown; statusCode?: unknown }
  const code = typeof status === 'number' ? status : statusCode
  return typeof code === 'number' && code >= 400 && code < 500 && ![408, 409, 429].includes(code)
}

export interface IdempotencyOptions {
  /** Where records live: `createMemoryStore()`, `createDrizzleStore(db)`, or your own. */
  store: IdempotencyStore
  /** How long a completed record is replayed. @default '24h' */
  ttl?: Duration
  /** How long an executor holds its lease before the key may be taken over. @default '60s' */
  lockTimeout?: Duration
  /** Reject keyed mutations that arrive without a key (`KEY_REQUIRED`). @default false */
  required?: boolean
  /** What a duplicate of an in-flight operation gets: `'reject'` (409) or `'wait'`. @default 'reject' */
  concurrency?: 'reject' | 'wait'
  /** With `concurrency: 'wait'`, how long to wait for the in-flight one before 409. @default '10s' */
  waitTimeout?: Duration
  /** The `Retry-After` given with 409, capped at the time left on the lease. @default '1s' */
  retryAfter?: Duration
  /** What a claim does when the store is unreachable. @default 'fail-closed' */
  onStoreError?: 'fail-closed' | 'fail-open'
  /** Which thrown errors are recorded and replayed (true) instead of releasing the key. @default defaultStoreErrors */
  storeErrors?: (error: unknown) => boolean
  /** A larger encoded response is not stored; its retries get `RESPONSE_NOT_STORED`. @default 1048576 */
  maxResponseBytes?: number
  /** How outcomes become text and back. @default defaultCodec (superjson) */
  codec?: Codec
  /** The clock for deadlines and events, in epoch ms; stores with a server use their own. @default Date.now */
  now?: () => number
  /** Called for each thing that happens to a keyed operation; errors it throws are logged, not raised. @default undefined */
  onEvent?: (event: IdempotencyEvent) => void
  /** Where diagnostics go. @default defaultLogger (console, prefixed) */
  logger?: Logger
  /** Run `store.sweep()` on this interval (unref'd timer); `false` to never. @default false */
  sweepInterval?: Duration | false
}

/** A recorded outcome as the engine hands it back. */
export type Outcome<T = unknown> = { ok: true; value: T } | { ok: false; error: unknown }

export interface OperationRequest {
  /** The client's key, validated here; `undefined`/`null` means none was sent. */
  key: string | null | undefined
  /** The operation's name: a tRPC path, GraphQL root fields, or your own. */
  operation: string
  /** The caller (tenant/user); records of different scopes never meet. @default '' */
  scope?: string
  /** The request payload whose fingerprint guards the key against reuse. */
  payload?: unknown
  /** A fingerprint computed by the caller; replaces `payload`. */
  fingerprint?: string
  /** Per-operation overrides of the engine's options. */
  required?: boolean
  ttl?: Duration
  lockTimeout?: Duration
  concurrency?: 'reject' | 'wait'
  waitTimeout?: Duration
}

export interface ExecuteRequest extends OperationRequest {
  /** Which errors to record for this call. @default the engine's `storeErrors` */
  storeErrors?: (error: unknown) => boolean
  /** Turns a recorded error into codec-friendly data. @default name, message, code, status */
  serializeError?: (error: unknown) => unknown
  /** Turns recorded error data back into what `execute` throws on a replay. @default ReplayedError */
  deserializeError?: (data: unknown) => unknown
}

export interface HandlerContext {
  /** True when this execution took over an expired lease (a previous executor died). */
  takeover: boolean
  /** A stable key for a downstream provider, derived from (scope, operation, key, name). */
  deriveKey(name: string): string
}

export interface ExecuteResult<T> {
  value: T
  /** True when the value came from the record and the handler did not run. */
  replayed: boolean
}

/** The lease an executor holds while it runs the operation. */
export interface Lease extends HandlerContext {
  /** Records the value (or completes without a body when it cannot be stored). */
  complete(value: unknown): Promise<void>
  /** Records a deterministic error as the outcome. */
  completeWithError(errorData: unknown): Promise<void>
  /** Deletes the record so a retry can run again. */
  release(): Promise<void>
}

export type Attempt =
  /** No key (and none required), or the store failed open: run without a record. */
  | { kind: 'bypass'; reason: 'no-key' | 'store-unavailable' }
  /** A completed record with the same fingerprint. */
  | { kind: 'replay'; outcome: Outcome }
  /** This caller holds the lease: run the operation, then complete or release. */
  | { kind: 'execute'; lease: Lease }

export interface Idempotency {
  /** Runs `handler` once per (scope, operation, key) and replays its outcome to every retry. */
  execute<T>(
    request: ExecuteRequest,
    handler: (context: HandlerContext) => T | Promise<T>,
  ): Promise<ExecuteResult<T>>
  /** The lower-level step adapters use when the end of an operation is seen in another hook. */
  begin(request: OperationRequest): Promise<Attempt>
  /** Deletes expired records through the store. */
  sweep(): Promise<number>
  /** Stops the sweep timer, if any. */
  close(): void
  readonly store: IdempotencyStore
}

/** What `execute` throws when it replays a recorded error that has no adapter-specific form. */
export class ReplayedError extends Error {
  override name = 'ReplayedError'
  readonly code: unknown
  readonly status: unknown
  constructor(data: { name?: unknown; message?: unknown; code?: unknown; status?: unknown }) {
    super(typeof data.message === 'string' ? data.message : 'Recorded error')
    if (typeof data.name === 'string') this.name = data.name
    this.code = data.code
    this.status = data.status
  }
}

function defaultSerializeError(error: unknown): unknown {
  const e = (error ?? {}) as { name?: unknown; message?: unknown; code?: unknown; status?: unknown }
  return { name: e.name, message: e.message, code: e.code, status: e.status }
}

function defaultDeserializeError(data: unknown): unknown {
  return new ReplayedError((data ?? {}) as Record<string, unknown>)
}

const completeRetryDelays = [25, 100, 400]
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

export function createIdempotency(options: IdempotencyOptions): Idempotency {
  const { store } = options
  if (!store || typeof store.claim !== 'function') {
    throw new TypeError('idempotent-mutations: createIdempotency needs a `store`')
  }
  const defaults = {
    ttl: toMilliseconds(options.ttl ?? '24h', 'ttl'),
    lockTimeout: toMilliseconds(options.lockTimeout ?? '60s', 'lockTimeout'),
    waitTimeout: toMilliseconds(options.waitTimeout ?? '10s', 'waitTimeout'),
    retryAfter: toMilliseconds(options.retryAfter ?? '1s', 'retryAfter'),
    required: options.required ?? false,
    concurrency: options.concurrency ?? 'reject',
  }
  const maxResponseBytes = options.maxResponseBytes ?? 1024 * 1024
  const onStoreError = options.onStoreError ?? 'fail-closed'
  const engineStoreErrors = options.storeErrors ?? defaultStoreErrors
  const codec = options.codec ?? defaultCodec
  const now = options.now ?? Date.now
  const logger = options.logger ?? defaultLogger

  type EventBase = Pick<IdempotencyEvent, 'operation' | 'scope' | 'key'>
  type EventDetails = Omit<IdempotencyEvent, 'type' | 'operation' | 'scope' | 'key'>
  // The event object is built only when someone listens: emit sits on every keyed call's path.
  const emit = (base: EventBase, type: IdempotencyEventType, details?: EventDetails) => {
    if (!options.onEvent) return
    try {
      options.onEvent({ ...base, type, ...details })
    } catch (error) {
      logger.error('onEvent threw', error)
    }
  }

  async function begin(request: OperationRequest): Promise<Attempt> {
    const required = request.required ?? defaults.required
    const callerScope = request.scope ?? ''
    if (request.key === undefined || request.key === null) {
      if (required) throw new KeyRequiredError()
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
    const scope = JSON.stringify([callerScope, request.operation])
    const fingerprint = request.fingerprint ?? fingerprintOf(request.payload)
    const base = { operation: request.operation, scope: callerScope, key }

    // An unfinished claim lives at least as long as its lease.
    const claimTtl = Math.max(ttl, lockTimeout)

    const deadline = now() + waitTimeout
    let pause = 20
    for (;;) {
      let result: ClaimResult
      try {
        // A fresh token per attempt: a waiter that claims after a release holds its own lease.
        result = await store.claim({
          scope,
          key,
          fingerprint,
          leaseToken: randomUUID(),
          lockTimeoutMs: lockTimeout,
          ttlMs: claimTtl,
        })
      } catch (error) {
        emit(base, 'store-error', { stage: 'claim', error })
        logger.error(`claim failed for operation ${request.operation}`, error)
        if (onStoreError === 'fail-open') return { kind: 'bypass', reason: 'store-unavailable' }
        throw new StoreUnavailableError({ cause: error })
      }
      if (result.claimed) {
        if (result.takeover) emit(base, 'takeover')
        return {
          kind: 'execute',
          lease: createLease(result.record, result.takeover, ttl, base, now()),
        }
      }
      const { record } = result
      // Same key, other payload: a client bug, whatever state the record is in.
      if (record.fingerprint !== fingerprint) {
        emit(base, 'mismatch')
        throw new KeyReusedError()
      }
      if (record.status === 'completed') {
        if (record.response === null) throw new ResponseNotStoredError()
        emit(base, 'replayed')
        return { kind: 'replay', outcome: codec.decode(record.response) as Outcome }
      }
      // In progress under a valid lease: someone else is running it right now.
      const leaseLeft = Math.max(0, record.lockedUntil - result.now)
      const remaining = deadline - now()
      if (concurrency === 'wait' && remaining > 0) {
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

  function createLease(
    record: IdempotencyRecord,
    takeover: boolean,
    ttl: number,
    base: { operation: string; scope: string; key: string },
    startedAt: number,
  ): Lease {
    const target = { scope: record.scope, key: record.key, leaseToken: record.leaseToken }
    let settled = false
    const settle = () => {
      if (settled) throw new Error('idempotent-mutations: a lease is completed or released once')
      settled = true
    }

    async function completedUnderThisLease(): Promise<boolean> {
      try {
        const current = await store.get(target.scope, target.key)
        return current?.status === 'completed' && current.leaseToken === target.leaseToken
      } catch {
        return false
      }
    }

    async function write(response: string | null): Promise<void> {
      for (let attempt = 0; ; attempt++) {
        try {
          const ok = await store.complete({
            scope: target.scope,
            key: target.key,
            leaseToken: target.leaseToken,
            response,
            ttlMs: ttl,
          })
          // After a failed attempt, `false` may mean that attempt did commit and only its answer
          // was lost: the record then stands completed under this lease, which is no loss.
          if (!ok && attempt > 0 && (await completedUnderThisLease())) return
          if (!ok) {
            emit(base, 'lost-lease')
            logger.warn(
              `lost the lease on operation ${base.operation} before completing: the outcome was not recorded (the key was taken over or released)`,
            )
          }
          return
        } catch (error) {
          const delay = completeRetryDelays[attempt]
          if (delay === undefined) {
            emit(base, 'store-error', { stage: 'complete', error })
            logger.error(
              `could not record the outcome of operation ${base.operation}; the key stays in progress until its lease ends`,
              error,
            )
            return
          }
          await sleep(delay)
        }
      }
    }

    async function recordOutcome(outcome: Outcome): Promise<void> {
      let response: string | null
      try {
        response = codec.encode(outcome)
      } catch (error) {
        emit(base, 'not-stored', { error })
        logger.warn(`the response of operation ${base.operation} is not serializable`, error)
        response = null
      }
      if (response !== null && Buffer.byteLength(response) > maxResponseBytes) {
        emit(base, 'not-stored', { error: new Error('response exceeds maxResponseBytes') })
        response = null
      }
      await write(response)
      if (options.onEvent) emit(base, 'executed', { durationMs: now() - startedAt })
    }

    return {
      takeover,
      deriveKey: (name: string) =>
        hashParts('idempotent-mutations/v1', record.scope, record.key, name),
      async complete(value) {
        settle()
        await recordOutcome({ ok: true, value })
      },
      async completeWithError(errorData) {
        settle()
        await recordOutcome({ ok: false, error: errorData })
      },
      async release() {
        settle()
        try {
          const ok = await store.release(target)
          if (ok) emit(base, 'released')
          else emit(base, 'lost-lease')
        } catch (error) {
          emit(base, 'store-error', { stage: 'release', error })
          logger.error(
            `could not release operation ${base.operation}; the key stays in progress until its lease ends`,
            error,
          )
        }
      },
    }
  }

  async function execute<T>(
    request: ExecuteRequest,
    handler: (context: HandlerContext) => T | Promise<T>,
  ): Promise<ExecuteResult<T>> {
    const attempt = await begin(request)
    if (attempt.kind === 'bypass') {
      return { value: await handler(unprotectedContext), replayed: false }
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
      if ((request.storeErrors ?? engineStoreErrors)(error)) {
        await lease.completeWithError((request.serializeError ?? defaultSerializeError)(error))
      } else {
        await lease.release()
      }
      throw error
    }
    await lease.complete(value)
    return { value, replayed: false }
  }

  const sweepEvery =
    options.sweepInterval === undefined || options.sweepInterval === false
      ? undefined
      : toMilliseconds(options.sweepInterval, 'sweepInterval')
  const timer =
    sweepEvery === undefined
      ? undefined
      : setInterval(() => {
          store.sweep().catch((error) => logger.error('sweep failed', error))
        }, sweepEvery)
  timer?.unref()

  return {
    execute,
    begin,
    sweep: () => store.sweep(),
    close: () => clearInterval(timer),
    store,
  }
}

const unprotectedContext: HandlerContext = {
  takeover: false,
  deriveKey() {
    throw new Error(
      'idempotent-mutations: deriveKey needs a keyed operation (this one ran without a key)',
    )
  },
}
