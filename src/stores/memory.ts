import type {
  ClaimInput,
  ClaimResult,
  CompleteInput,
  IdempotencyRecord,
  InspectableStore,
  ReleaseInput,
  SweepOptions,
} from '../store'
import {
  type PinnedInspection,
  type PinnedRecord,
  pinnedInspection,
  releaseKeyWith,
} from './operator'
import { claimedRecord } from './record'
import { sweepOptionsOf } from './sweep'

export interface MemoryStoreOptions {
  /**
   * The clock, in epoch milliseconds. Without it the store follows the clock of the first
   * engine created over it (`createIdempotency({ store, now })`, `Date.now` for an engine without
   * `now`); an engine with another clock over the same store is then refused with a TypeError.
   * @default the first engine's clock
   */
  now?: (() => number) | undefined
  /**
   * The most records kept. When full, expired records go first, then completed ones (and
   * lapsed leases), taken round the store (scope by scope, in claim order within each); a
   * record under a valid lease is never evicted (a full store of those rejects claims).
   * @default 10000
   */
  maxRecords?: number | undefined
}

/**
 * Records in a `Map`, for tests and single-process development. Every method answers with
 * copies, so a caller mutating a record cannot change what is stored. JavaScript runs each
 * method to completion without interleaving, which is what makes `claim` atomic here.
 */
export function createMemoryStore(options: MemoryStoreOptions = {}): InspectableStore {
  let now = options.now ?? Date.now
  // The engine clock this store follows (see useClock), when it was given none of its own.
  let engineClock: (() => number) | undefined
  const maxRecords = options.maxRecords ?? 10_000
  if (!Number.isInteger(maxRecords) || maxRecords < 1) {
    throw new TypeError('idempotent-mutations: maxRecords must be a positive integer')
  }
  const records = new RecordTable(maxRecords)

  return {
    // The engine keeps no copies of records in front of this store: they are here already.
    inProcess: true,

    useClock(clock: () => number): void {
      if (options.now !== undefined || clock === engineClock) return
      // Two engines with different clocks over one store: its leases and expiry would follow
      // whichever came last, and the other engine's time would silently not count.
      if (engineClock !== undefined) {
        throw new TypeError(
          "idempotent-mutations: this memory store already follows another engine's clock; pass both engines the same `now` function, or give the store its own, createMemoryStore({ now })",
        )
      }
      engineClock = clock
      now = clock
    },

    async claim(input: ClaimInput): Promise<ClaimResult> {
      const at = now()
      const existing = records.find(input.scope, input.key)
      let takeover: boolean
      if (existing === undefined || existing.expiresAt <= at) {
        if (existing) records.remove(input.scope, input.key)
        records.makeRoom(at)
        takeover = false
      } else if (
        existing.status === 'in_progress' &&
        existing.lockedUntil <= at &&
        existing.fingerprint === input.fingerprint
      ) {
        takeover = true
      } else {
        return { claimed: false, record: { ...existing }, now: at }
      }
      const record = claimedRecord(input, at + input.lockTimeoutMs, at + input.ttlMs)
      records.put(record)
      return { claimed: true, takeover, record: { ...record } }
    },

    async complete(input: CompleteInput): Promise<boolean> {
      const existing = records.find(input.scope, input.key)
      if (existing?.status !== 'in_progress' || existing.leaseToken !== input.leaseToken) {
        return false
      }
      // In place: the stored object never leaves the store (callers get copies), and a new one
      // per completion would be one more object for the garbage collector to move.
      existing.status = 'completed'
      existing.response = input.response
      existing.expiresAt = now() + input.ttlMs
      records.expiresAt(existing.expiresAt)
      return true
    },

    async release(input: ReleaseInput): Promise<boolean> {
      const existing = records.find(input.scope, input.key)
      if (existing?.status !== 'in_progress' || existing.leaseToken !== input.leaseToken) {
        return false
      }
      records.remove(input.scope, input.key)
      return true
    },

    async get(scope: string, key: string): Promise<IdempotencyRecord | undefined> {
      const record = records.find(scope, key)
      return record && { ...record }
    },

    async inspect(scope, key) {
      return records.inspect(scope, key, now())?.inspection
    },

    async releaseKey(scope, key, releaseOptions) {
      const read = async (s: string, k: string) => records.inspect(s, k, now())
      const remove = async (pinned: PinnedRecord) => records.removePinned(pinned)
      return releaseKeyWith(scope, key, releaseOptions, read, remove)
    },

    // One pass over memory: nothing to batch or pace, but the options are checked as everywhere.
    async sweep(sweepOptions?: SweepOptions): Promise<number> {
      const { limit, signal } = sweepOptionsOf(sweepOptions)
      return signal?.aborted ? 0 : records.sweep(now(), limit)
    },
  }
}

/** The memory store's records, with what keeps them under `maxRecords`. */
class RecordTable {
  // Records by scope, then key: no string joining the two on every call (and the engine passes
  // the same string object for a shared scope, so its hash is computed once).
  readonly #records = new Map<string, Map<string, IdempotencyRecord>>()
  readonly #maxRecords: number
  #size = 0
  // A lower bound on every stored record's expiresAt. While the clock is below it no record can
  // be expired, so a full store skips its scan for expired records: without this, every claim
  // into a full store walked all `maxRecords` records.
  #earliestExpiry = Number.POSITIVE_INFINITY
  // Where the last eviction stopped: a scope's records, in claim order, and the scopes after it.
  // Map iterators stay valid while their Maps change, and resuming them keeps each eviction
  // O(1): restarting from the first entry every time would walk the holes earlier deletions
  // leave at the front of a Map's table.
  #scopes: Iterator<[string, Map<string, IdempotencyRecord>]> | undefined
  #inScope:
    | {
        scope: string
        byKey: Map<string, IdempotencyRecord>
        keys: Iterator<[string, IdempotencyRecord]>
      }
    | undefined

  constructor(maxRecords: number) {
    this.#maxRecords = maxRecords
  }

  find(scope: string, key: string): IdempotencyRecord | undefined {
    return this.#records.get(scope)?.get(key)
  }

  /** What `inspect` reports of a record, at `now`, with its lease token. */
  inspect(scope: string, key: string, now: number): PinnedInspection | undefined {
    const record = this.find(scope, key)
    if (record === undefined) return undefined
    const { expiresAt, response } = record
    const responseBytes = response === null ? null : Buffer.byteLength(response)
    return pinnedInspection({ ...record, scope, key }, { expiresAt, now, responseBytes })
  }

  /** Removes the record only if it still has the lease token and status `inspect` read. */
  removePinned({ scope, key, leaseToken, status }: PinnedRecord): boolean {
    const record = this.find(scope, key)
    if (record?.leaseToken !== leaseToken || record.status !== status) return false
    this.remove(scope, key)
    return true
  }

  put(record: IdempotencyRecord): void {
    let byKey = this.#records.get(record.scope)
    if (byKey === undefined) {
      byKey = new Map()
      this.#records.set(record.scope, byKey)
    }
    const before = byKey.size
    byKey.set(record.key, record)
    this.#size += byKey.size - before
    this.expiresAt(record.expiresAt)
  }

  /** Notes a stored record's (new) expiresAt. */
  expiresAt(at: number): void {
    if (at < this.#earliestExpiry) this.#earliestExpiry = at
  }

  remove(scope: string, key: string, byKey = this.#records.get(scope)): void {
    if (byKey?.delete(key)) {
      this.#size--
      if (byKey.size === 0) this.#records.delete(scope)
    }
  }

  /** Deletes up to `limit` records past their expiresAt at `at`; returns how many. */
  sweep(at: number, limit: number): number {
    let deleted = 0
    for (const [scope, byKey] of this.#records) {
      for (const [k, r] of byKey) {
        if (deleted >= limit) return deleted
        if (r.expiresAt <= at) {
          this.remove(scope, k, byKey)
          deleted++
        }
      }
    }
    return deleted
  }

  /** Frees a place for one more record: expired ones first, then completed ones and lapsed leases. */
  makeRoom(at: number): void {
    if (this.#size < this.#maxRecords) return
    if (at >= this.#earliestExpiry) {
      this.#earliestExpiry = Number.POSITIVE_INFINITY
      for (const [scope, byKey] of this.#records) {
        for (const [k, r] of byKey) {
          if (r.expiresAt <= at) this.remove(scope, k, byKey)
          else this.expiresAt(r.expiresAt)
        }
      }
    }
    while (this.#size >= this.#maxRecords) {
      if (!this.#evictOne(at)) {
        throw new Error(`memory store is full: ${this.#maxRecords} records hold valid leases`)
      }
    }
  }

  /** Deletes the next completed record or lapsed lease, scope by scope; false if there is none. */
  #evictOne(at: number): boolean {
    // Two passes at most: from the cursor to the end, then once more from the start.
    for (let pass = 0; pass < 2; pass++) {
      this.#scopes ??= this.#records.entries()
      for (;;) {
        if (this.#inScope === undefined) {
          const next = this.#scopes.next()
          if (next.done) break
          const [scope, byKey] = next.value
          this.#inScope = { scope, byKey, keys: byKey.entries() }
        }
        const inScope = this.#inScope
        for (let next = inScope.keys.next(); !next.done; next = inScope.keys.next()) {
          const [k, r] = next.value
          if (r.status === 'completed' || r.lockedUntil <= at) {
            this.remove(inScope.scope, k, inScope.byKey)
            return true
          }
        }
        this.#inScope = undefined
      }
      this.#scopes = undefined
    }
    return false
  }
}
