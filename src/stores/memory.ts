import type {
  ClaimInput,
  ClaimResult,
  CompleteInput,
  IdempotencyRecord,
  IdempotencyStore,
  ReleaseInput,
  SweepOptions,
} from '../store'

export interface MemoryStoreOptions {
  /**
   * The clock, in epoch milliseconds. Pass the engine's `now` so tests can move time.
   * @default Date.now
   */
  now?: () => number
  /**
   * The most records kept. When full, expired records go first, then completed ones (and
   * lapsed leases), taken in claim order round the store; a record under a valid lease is never
   * evicted (a full store of those rejects claims).
   * @default 10000
   */
  maxRecords?: number
}

/**
 * Records in a `Map`, for tests and single-process development. Every method answers with
 * copies, so a caller mutating a record cannot change what is stored. JavaScript runs each
 * method to completion without interleaving, which is what makes `claim` atomic here.
 */
export function createMemoryStore(options: MemoryStoreOptions = {}): IdempotencyStore {
  const now = options.now ?? Date.now
  const maxRecords = options.maxRecords ?? 10_000
  if (!Number.isInteger(maxRecords) || maxRecords < 1) {
    throw new TypeError('idempotent-mutations: maxRecords must be a positive integer')
  }
  const records = new Map<string, IdempotencyRecord>()
  const id = (scope: string, key: string) => `${scope.length}:${scope}${key}`
  // A lower bound on every stored record's expiresAt. While the clock is below it no record can
  // be expired, so a full store skips its scan for expired records: without this, every claim
  // into a full store walked all `maxRecords` records.
  let earliestExpiry = Number.POSITIVE_INFINITY
  const put = (rid: string, record: IdempotencyRecord) => {
    records.set(rid, record)
    if (record.expiresAt < earliestExpiry) earliestExpiry = record.expiresAt
  }

  // Where the last eviction stopped. A Map iterator stays valid while the Map changes, and
  // resuming it keeps each eviction O(1): restarting from the first entry every time would walk
  // the holes earlier deletions leave at the front of the Map's table.
  let cursor: Iterator<[string, IdempotencyRecord]> | undefined

  /** Deletes the next completed record or lapsed lease in claim order; false if there is none. */
  function evictOne(at: number): boolean {
    // Two passes at most: from the cursor to the end, then once more from the start.
    for (let pass = 0; pass < 2; pass++) {
      cursor ??= records.entries()
      for (let next = cursor.next(); !next.done; next = cursor.next()) {
        const [k, r] = next.value
        if (r.status === 'completed' || r.lockedUntil <= at) {
          records.delete(k)
          return true
        }
      }
      cursor = undefined
    }
    return false
  }

  function makeRoom(at: number): void {
    if (records.size < maxRecords) return
    if (at >= earliestExpiry) {
      earliestExpiry = Number.POSITIVE_INFINITY
      for (const [k, r] of records) {
        if (r.expiresAt <= at) records.delete(k)
        else if (r.expiresAt < earliestExpiry) earliestExpiry = r.expiresAt
      }
    }
    while (records.size >= maxRecords) {
      if (!evictOne(at)) {
        throw new Error(`memory store is full: ${maxRecords} records hold valid leases`)
      }
    }
  }

  return {
    // The engine keeps no copies of records in front of this store: they are here already.
    inProcess: true,

    async claim(input: ClaimInput): Promise<ClaimResult> {
      const at = now()
      const rid = id(input.scope, input.key)
      const existing = records.get(rid)
      let takeover: boolean
      if (existing === undefined || existing.expiresAt <= at) {
        if (existing) records.delete(rid)
        makeRoom(at)
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
      const record: IdempotencyRecord = {
        scope: input.scope,
        key: input.key,
        fingerprint: input.fingerprint,
        status: 'in_progress',
        response: null,
        leaseToken: input.leaseToken,
        lockedUntil: at + input.lockTimeoutMs,
        expiresAt: at + input.ttlMs,
      }
      put(rid, record)
      return { claimed: true, takeover, record: { ...record } }
    },

    async complete(input: CompleteInput): Promise<boolean> {
      const rid = id(input.scope, input.key)
      const existing = records.get(rid)
      if (existing?.status !== 'in_progress' || existing.leaseToken !== input.leaseToken) {
        return false
      }
      // In place: the stored object never leaves the store (callers get copies), and a new one
      // per completion would be one more object for the garbage collector to move.
      existing.status = 'completed'
      existing.response = input.response
      existing.expiresAt = now() + input.ttlMs
      if (existing.expiresAt < earliestExpiry) earliestExpiry = existing.expiresAt
      return true
    },

    async release(input: ReleaseInput): Promise<boolean> {
      const rid = id(input.scope, input.key)
      const existing = records.get(rid)
      if (existing?.status !== 'in_progress' || existing.leaseToken !== input.leaseToken) {
        return false
      }
      records.delete(rid)
      return true
    },

    async get(scope: string, key: string): Promise<IdempotencyRecord | undefined> {
      const record = records.get(id(scope, key))
      return record && { ...record }
    },

    async sweep(sweepOptions: SweepOptions = {}): Promise<number> {
      const limit = sweepOptions.limit ?? Number.POSITIVE_INFINITY
      const at = now()
      let deleted = 0
      for (const [k, r] of records) {
        if (deleted >= limit) break
        if (r.expiresAt <= at) {
          records.delete(k)
          deleted++
        }
      }
      return deleted
    },
  }
}
