/**
 * The engine's public types: what `createIdempotency` returns, what its callers hand it, and what
 * it hands back (attempts, leases, handler contexts, events).
 */
import type { Duration } from '../duration'
import type { IdempotencyErrorCode } from '../errors'
import type { IdempotencyStore, SweepOptions } from '../store'

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
  | 'completion-deferred'
  | 'completed-late'
  | 'outcome-unknown'

export interface IdempotencyEvent {
  type: IdempotencyEventType
  operation: string
  /** The caller's scope as the adapter or caller gave it ('' when none). */
  scope: string
  key: string
  /** For `executed`: how long the handler ran, in milliseconds. */
  durationMs?: number | undefined
  /** For `store-error`, `completion-deferred` and `outcome-unknown`: which store call failed. */
  stage?: 'claim' | 'complete' | 'release' | 'commit' | undefined
  /** For `store-error`, `not-stored`, `completion-deferred` and `outcome-unknown`: what went wrong. */
  error?: unknown | undefined
  /**
   * The code of the error the caller got because of it, when it got one: `IN_PROGRESS` with
   * `conflict`, `KEY_REUSED` with `mismatch`, `STORE_UNAVAILABLE` with `store-error` (a claim
   * that failed closed, a transaction that did not commit), `RESPONSE_NOT_STORED` with
   * `not-stored` (a record that cannot be read back), `OUTCOME_UNKNOWN` with `outcome-unknown`.
   */
  code?: IdempotencyErrorCode | undefined
}

export interface Logger {
  warn(message: string, ...details: unknown[]): void
  error(message: string, ...details: unknown[]): void
}

/** A recorded outcome as the engine hands it back. */
export type Outcome<T = unknown> = { ok: true; value: T } | { ok: false; error: unknown }

export interface OperationRequest {
  /** The client's key, validated here; `undefined`/`null` means none was sent. */
  key: string | null | undefined
  /** The operation's name: a tRPC path, GraphQL root fields, or your own. */
  operation: string
  /** The caller (tenant/user); records of different scopes never meet. @default '' */
  scope?: string | undefined
  /** The request payload whose fingerprint guards the key against reuse. */
  payload?: unknown | undefined
  /** A fingerprint computed by the caller; replaces `payload`. */
  fingerprint?: string | undefined
  /** Per-operation overrides of the engine's options. */
  required?: boolean | undefined
  ttl?: Duration | undefined
  lockTimeout?: Duration | undefined
  concurrency?: 'reject' | 'wait' | undefined
  waitTimeout?: Duration | undefined
  /** Run this operation in one transaction with its record. @default the engine's `transactional` */
  transactional?: boolean | undefined
  /**
   * Which adapter asks (`trpc`, `yoga`, `envelop`, `apollo`, `fetch`, `hono`, `express`): the
   * `idempotency.adapter` attribute of the operation's telemetry. @default undefined
   */
  adapter?: string | undefined
}

export interface ExecuteRequest extends OperationRequest {
  /** Which errors to record for this call. @default the engine's `storeErrors` */
  storeErrors?: ((error: unknown) => boolean) | undefined
  /** Turns a recorded error into codec-friendly data. @default name, message, code, status */
  serializeError?: ((error: unknown) => unknown) | undefined
  /** Turns recorded error data back into what `execute` throws on a replay. @default ReplayedError */
  deserializeError?: ((data: unknown) => unknown) | undefined
}

export interface HandlerContext<TTransaction = unknown> {
  /** True when this execution took over an expired lease (a previous executor died). */
  takeover: boolean
  /**
   * A stable key for a downstream provider, derived from (scope, operation, key, name): the same
   * on every retry and takeover of this operation, different for another name, key or scope.
   * Pass it to the provider's own idempotency mechanism (a payment API's Idempotency-Key).
   * Throws for an operation that runs without a key.
   */
  deriveKey(name: string): string
  /**
   * Transactional mode: the database transaction to write with (for the Drizzle store, your
   * drizzle transaction). Its writes commit with the record, or not at all. Undefined otherwise.
   */
  tx?: TTransaction | undefined
}

export interface ExecuteResult<T> {
  value: T
  /** True when the value came from the record and the handler did not run. */
  replayed: boolean
}

/**
 * The lease an executor holds while it runs the operation.
 *
 * In transactional mode the lease holds an open transaction (`tx`), and settling it ends the
 * transaction: `complete` records the value and commits the handler's writes with it;
 * `completeWithError` rolls the handler's writes back (a savepoint) and commits the recorded
 * error; `release` rolls everything back. `complete` and `completeWithError` then reject when
 * the commit fails: nothing happened, and the caller must not report success.
 */
export interface Lease<TTransaction = unknown> extends HandlerContext<TTransaction> {
  /** Records the value (or completes without a body when it cannot be stored). */
  complete(value: unknown): Promise<void>
  /** Records a deterministic error as the outcome. */
  completeWithError(errorData: unknown): Promise<void>
  /** Deletes the record so a retry can run again. */
  release(): Promise<void>
  /**
   * Transactional mode: runs `fn` in a savepoint of `tx`, so a throw rolls back only `fn`'s
   * writes (the GraphQL adapter runs each root mutation field in one). Undefined otherwise.
   */
  savepoint?<T>(fn: (tx: TTransaction) => Promise<T>): Promise<T>
}

export type Attempt<TTransaction = unknown> =
  /** No key (and none required), or the store failed open: run without a record. */
  | { kind: 'bypass'; reason: 'no-key' | 'store-unavailable' }
  /** A completed record with the same fingerprint. */
  | { kind: 'replay'; outcome: Outcome }
  /**
   * This caller holds the lease: run the operation, then complete or release. In transactional
   * mode a call without a key (or one the store failed open for) also comes here, with a lease
   * whose transaction holds no record: completing it commits, anything else rolls back.
   */
  | { kind: 'execute'; lease: Lease<TTransaction> }

export interface Idempotency<TTransaction = unknown> {
  /**
   * Runs `handler` once per (scope, operation, key) and replays its outcome to every retry. With
   * `transactional: true` the handler writes through `context.tx`, and its writes commit with
   * the recorded outcome (a recorded error rolls them back; anything else rolls back both).
   */
  execute<T>(
    request: ExecuteRequest & { transactional: true },
    handler: (context: HandlerContext<TTransaction> & { tx: TTransaction }) => T | Promise<T>,
  ): Promise<ExecuteResult<T>>
  execute<T>(
    request: ExecuteRequest,
    handler: (context: HandlerContext<TTransaction>) => T | Promise<T>,
  ): Promise<ExecuteResult<T>>
  /** The lower-level step adapters use when the end of an operation is seen in another hook. */
  begin(request: OperationRequest): Promise<Attempt<TTransaction>>
  /**
   * Deletes expired records through the store (`batchSize`, `limit`, `pause`, `signal`:
   * `store.sweep()`'s, back to back unless `pause` says otherwise).
   */
  sweep(options?: SweepOptions): Promise<number>
  /**
   * Waits for the completions still being retried in the background (see `completeTimeout`) to
   * land or give up. For tests and graceful shutdowns.
   */
  drain(): Promise<void>
  /**
   * Stops the sweep timer, if any, and the sweep it is running (at its next batch), and makes
   * background completions give up at their next pause. Resolves once that sweep has ended, so
   * the database client can be closed after it.
   */
  close(): Promise<void>
  readonly store: IdempotencyStore<TTransaction>
  /** The engine's `transactional` option: whether operations run in transactions by default. */
  readonly transactional?: boolean | undefined
  /** The engine's `required` option: whether an operation without a key is refused by default. */
  readonly required?: boolean | undefined
  /** The engine's `logger` option (or the default): adapters log through it. */
  readonly logger: Logger
}
