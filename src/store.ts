/**
 * The store interface: the whole contract between the engine and a place that keeps records.
 * Stores keep no engine configuration: validation, fingerprints, encoding and policy live in
 * the engine. Times are epoch milliseconds and, for stores with a server (Postgres, Redis),
 * come from the server's clock so app servers with skewed clocks agree.
 *
 * A record's life:
 *
 *     (absent) --claim--> in_progress --complete(token)--> completed --expires_at--> (absent)
 *                          |  |                                           ^
 *                          |  +--release(token)--> (absent)               |
 *                          +--locked_until passes, same fingerprint --> claim = takeover
 *                             (new token; the old executor is fenced off) |
 *     any record past expires_at is treated as absent by claim, and deleted by sweep()
 */
import type { Duration } from './duration'

// The one value here, for src/stores/drizzle/store.ts until it imports it from ./stores/record.

export type RecordStatus = 'in_progress' | 'completed'

export interface IdempotencyRecord {
  /** The engine's scope string (caller scope plus operation); opaque to the store. */
  scope: string
  key: string
  fingerprint: string
  status: RecordStatus
  /**
   * The encoded outcome of a completed record. `null` while in progress, and for a record
   * completed without a body (the response was too large or not serializable).
   */
  response: string | null
  /** The fencing token of the current lease holder. */
  leaseToken: string
  /** While `in_progress`: when the lease ends and the record may be taken over. */
  lockedUntil: number
  /** When the record stops counting and may be swept. */
  expiresAt: number
}

export interface ClaimInput {
  scope: string
  key: string
  fingerprint: string
  /** A token that identifies this claim's lease, never used by another claim. */
  leaseToken: string
  /** The lease length: `locked_until = now + lockTimeoutMs`. */
  lockTimeoutMs: number
  /** How long an in-progress record counts if it is never completed: `expires_at = now + ttlMs`. */
  ttlMs: number
}

export type ClaimResult =
  /** This caller holds the lease. `takeover` is true when it replaced an expired lease. */
  | { claimed: true; takeover: boolean; record: IdempotencyRecord }
  /** Another record stands. `now` is the store's clock at the time of the claim. */
  | { claimed: false; record: IdempotencyRecord; now: number }

export interface CompleteInput {
  scope: string
  key: string
  leaseToken: string
  /** The encoded outcome, or `null` to complete without a body. */
  response: string | null
  /** `expires_at = now + ttlMs`. */
  ttlMs: number
}

export interface ReleaseInput {
  scope: string
  key: string
  leaseToken: string
}

export interface SweepOptions {
  /** Rows deleted per statement. @default 1000 */
  batchSize?: number | undefined
  /** Stop after this many rows in total. @default Infinity */
  limit?: number | undefined
  /**
   * Wait this long between two batches (milliseconds, or `'150ms'`), so that a sweep of a large
   * backlog leaves the database to the requests it serves meanwhile. Stores that delete in one
   * step (memory) or not at all (Redis) have nothing to pace. @default 0
   */
  pause?: Duration | undefined
  /**
   * Stops the sweep between two batches (a pause ends at once): it resolves with the records
   * deleted so far. Already aborted, the sweep deletes nothing. In the engine's `sweepOptions`,
   * it ends the timer's sweeps for good. @default undefined
   */
  signal?: AbortSignal | undefined
}

/**
 * One record as an operator sees it (`inspect`): what it is, whose lease holds it and until when,
 * when it stops counting, and how large its stored response is. Times are epoch milliseconds on
 * the store's clock, with that clock's reading (`now`) to compare them with. The response itself
 * and the lease token stay out of it: `get` reads the whole record.
 */
export interface RecordInspection {
  /** The engine's scope string (caller scope plus operation); opaque to the store. */
  scope: string
  key: string
  status: RecordStatus
  fingerprint: string
  /**
   * While `in_progress`: when its lease ends. Before then its executor may still be running and
   * a retry gets 409; after it, a retry with the same payload takes the key over. Undefined once
   * completed.
   */
  lockedUntil: number | undefined
  /** When the record stops counting (a claim treats it as absent) and may be swept. */
  expiresAt: number
  /** The store's clock when it read the record. */
  now: number
  /**
   * The stored response's size in bytes (UTF-8), or null when there is none: in progress, or
   * completed without a body (too large, or not serializable: a retry gets RESPONSE_NOT_STORED).
   */
  responseBytes: number | null
}

export interface ReleaseKeyOptions {
  /**
   * Delete an in-progress record even while its lease is live. Its executor may still be running:
   * its outcome will not be recorded (it lost its lease), and a retry runs the operation again.
   * @default false
   */
  force?: boolean | undefined
}

export type ReleaseKeyResult =
  /** Deleted; `record` is what it was. The next request with this key runs anew. */
  | { released: true; record: RecordInspection }
  /** No record of this scope and key. */
  | { released: false; reason: 'absent' }
  /** In progress under a live lease, and not forced: left as it is. */
  | { released: false; reason: 'lease-held'; record: RecordInspection }

/**
 * What a transactional claim reports. Besides `claim`'s two answers, the claim can be
 * interrupted: `'lock-wait'` when another transaction holds an uncommitted claim of the key and
 * did not end within `lockWaitMs` (the operation is in flight); `'serialization'` when the
 * database refused the statement for a concurrent change (a serialization failure or
 * deadlock) and a claim in a new transaction may succeed. Either way the transaction is
 * unusable and the engine rolls it back.
 */
export type TransactionClaimResult =
  | (ClaimResult & {
      /**
       * True when the claim sent statements after its first one, and so after whatever
       * `afterFirstStatement` sent (see {@link TransactionClaimOptions}).
       */
      laterStatements?: boolean
    })
  | { claimed: false; interrupted: 'lock-wait' | 'serialization' }

export interface TransactionClaimOptions {
  /**
   * How long the claim may wait for a concurrent transaction that holds an uncommitted claim of
   * the same key (PostgreSQL: `lock_timeout` while the claim runs), in milliseconds, at least 1.
   */
  lockWaitMs: number
  /**
   * Called at most once, synchronously, right after the claim's first statement was asked for,
   * where the driver queues statements on the connection in the order they are asked for and
   * sends them without waiting for the answers to those before (postgres.js pipelines). What
   * the caller asks for from it goes out behind that statement, in the same round trip once the
   * statement is prepared on the connection: the engine opens the handler's savepoint there. A
   * store that cannot promise that order never calls it.
   */
  afterFirstStatement?: () => void
}

/**
 * One database transaction of a store, as transactional mode uses it: the record is claimed,
 * the handler writes, and the outcome is recorded, all in this transaction, so they commit or
 * roll back together. A claim written here is invisible to other callers until the
 * transaction commits; by then it is completed.
 */
export interface StoreTransaction<TTransaction = unknown> {
  /** The database transaction (for the Drizzle store: the drizzle transaction) to write with. */
  readonly handle: TTransaction
  /**
   * `claim` inside this transaction, under the same contract, except that:
   * - a concurrent transaction's uncommitted claim of the same key MUST be waited for (at most
   *   `options.lockWaitMs`); when it commits, its record is the answer (`claimed: false`); when it
   *   rolls back, the key is absent and this claim wins;
   * - a wait that runs out answers `{ claimed: false, interrupted: 'lock-wait' }`, a concurrency
   *   failure of the database `{ claimed: false, interrupted: 'serialization' }`;
   * - settings it changes to bound the wait MUST be restored before it returns a claim, so the
   *   handler's own statements run under the caller's settings.
   */
  claim(input: ClaimInput, options: TransactionClaimOptions): Promise<TransactionClaimResult>
  /** `complete` inside this transaction: it takes effect when the transaction commits. */
  complete(input: CompleteInput): Promise<boolean>
  /**
   * Runs `fn` in a savepoint: if `fn` throws, its writes are rolled back and the error is
   * rethrown, and this transaction stays usable; if it resolves, its writes are kept.
   */
  savepoint<T>(fn: (transaction: StoreTransaction<TTransaction>) => Promise<T>): Promise<T>
}

/**
 * `TTransaction` is the type of the database transaction a store hands to handlers in
 * transactional mode (`unknown` for stores without transactions).
 */
export interface IdempotencyStore<TTransaction = unknown> {
  /**
   * True when the records live in this process's memory (the memory store). The engine then
   * keeps no copies of completed records in front of it (its `replayCache` option): they would
   * save nothing.
   */
  readonly inProcess?: boolean | undefined

  /**
   * Optional; for stores without a clock of their own (the memory store). `createIdempotency`
   * calls it with its clock (its `now` option, else `Date.now`), so the store's leases and expiry
   * follow the engine's (SPEC: the memory store uses the engine's injectable clock). It may throw
   * (a TypeError) to refuse a second engine with another clock; a store given its own keeps it.
   */
  useClock?(now: () => number): void

  /**
   * Atomically claims `(scope, key)` or reports the record that stands in the way.
   *
   * - No record, or a record past `expiresAt`: MUST write a new `in_progress` record with
   *   `input.leaseToken` and return `{ claimed: true, takeover: false }`.
   * - An `in_progress` record past `lockedUntil` whose fingerprint equals `input.fingerprint`:
   *   MUST replace its lease token and times and return `{ claimed: true, takeover: true }`.
   * - Anything else (a completed record, a valid lease, an expired lease with another
   *   fingerprint): MUST NOT change the record, and MUST return it with the store's `now`.
   *
   * When N callers race on one key, exactly one of them MUST get `claimed: true`; every other
   * one MUST get the winner's record. A claim SHOULD be one round trip.
   * A store that cannot answer MUST throw (the engine maps it to `STORE_UNAVAILABLE`).
   */
  claim(input: ClaimInput): Promise<ClaimResult>

  /**
   * Marks the record completed with its response and `expiresAt = now + ttlMs`, only if it is
   * still `in_progress` under `input.leaseToken`. Returns false, changing nothing, when the
   * lease was lost (taken over, released or swept): a fenced-off executor MUST NOT overwrite
   * the new outcome.
   */
  complete(input: CompleteInput): Promise<boolean>

  /**
   * Deletes the record only if it is `in_progress` under `input.leaseToken`, so a retry can
   * run the operation again. Returns false, changing nothing, when the lease was lost.
   */
  release(input: ReleaseInput): Promise<boolean>

  /**
   * Reads a record as it stands (expired ones included), or undefined. Tools and tests use it,
   * and the engine reads it when `complete` answers false, to tell a completion whose answer was
   * lost from a lost lease.
   */
  get(scope: string, key: string): Promise<IdempotencyRecord | undefined>

  /**
   * Deletes records past `expiresAt` in batches of `batchSize`, so no statement holds locks
   * for long. Returns the number deleted.
   */
  sweep(options?: SweepOptions): Promise<number>

  /**
   * Optional (every store this package ships has it); for operators and tools. Reads one record
   * as it stands, expired ones included, without its response: see {@link RecordInspection}.
   * MUST NOT change the record.
   */
  inspect?(scope: string, key: string): Promise<RecordInspection | undefined>

  /**
   * Optional (every store this package ships has it); for operators and tools. Deletes the record
   * of `(scope, key)` on purpose, whatever its lease token, so the next request with the key runs
   * anew:
   * - a completed record, or one past `expiresAt`: MUST be deleted;
   * - an in-progress record whose lease ended (`lockedUntil` passed): MUST be deleted;
   * - an in-progress record under a live lease: MUST be left alone (`reason: 'lease-held'`)
   *   unless `options.force`, because its executor may still be running.
   * The decision and the delete MUST be about one and the same record: a record that changed in
   * between (completed, taken over, claimed anew) is decided again, never deleted on the strength
   * of what it was. A record it deletes is gone for `complete` and `release` too: its executor's
   * late completion answers false (a lost lease).
   */
  releaseKey?(scope: string, key: string, options?: ReleaseKeyOptions): Promise<ReleaseKeyResult>

  /**
   * Optional; only stores that keep records in the business database have it (the Drizzle
   * store). Runs `fn` in one database transaction: commits when `fn` resolves, rolls back and
   * rethrows when it rejects. Transactional mode (`createIdempotency({ transactional: true })`)
   * needs it, and is refused for a store without it.
   */
  transaction?<T>(fn: (transaction: StoreTransaction<TTransaction>) => Promise<T>): Promise<T>
}

/**
 * A store whose operator's calls are there (they are optional on {@link IdempotencyStore}): every
 * store this package ships. The CLI (`npx idempotent-mutations`) uses them.
 */
export interface InspectableStore<TTransaction = unknown> extends IdempotencyStore<TTransaction> {
  inspect(scope: string, key: string): Promise<RecordInspection | undefined>
  releaseKey(scope: string, key: string, options?: ReleaseKeyOptions): Promise<ReleaseKeyResult>
}
