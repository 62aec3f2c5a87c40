import type {
  ClaimInput,
  ClaimResult,
  CompleteInput,
  IdempotencyRecord,
  InspectableStore,
  ReleaseInput,
  SweepOptions,
} from '../../store'
import { type PinnedInspection, type PinnedRecord, releaseKeyWith } from '../operator'
import { pauseUnlessAborted, sweepOptionsOf } from '../sweep'
import { type ClaimPhases, claimInPhases } from './claim'

/** What each dialect of the Drizzle store answers; {@link sqlStore} makes a store of it. */
export interface SqlDialect {
  /** The claim's phases for one claim of `input` (see ./claim.ts). */
  claimPhases(input: ClaimInput): ClaimPhases
  complete(input: CompleteInput): Promise<boolean>
  release(input: ReleaseInput): Promise<boolean>
  get(scope: string, key: string): Promise<IdempotencyRecord | undefined>
  /** The record as `inspect` reports it, with its lease token; undefined for none. */
  inspect(scope: string, key: string): Promise<PinnedInspection | undefined>
  /** Deletes the record only if it still has `record`'s lease token and status. */
  deletePinned(record: PinnedRecord): Promise<boolean>
  /** Deletes at most `size` expired records; resolves with how many it deleted. */
  sweepBatch(size: number): Promise<number>
  ensureTable(): Promise<void>
}

/** The store calls of a dialect, with the claim loop and the sweep's batches around it. */
export function sqlStore(dialect: SqlDialect): InspectableStore & {
  ensureTable(): Promise<void>
} {
  return {
    ensureTable: () => dialect.ensureTable(),

    async claim(input: ClaimInput): Promise<ClaimResult> {
      return (await claimInPhases(input, dialect.claimPhases(input))).result
    },

    complete: (input) => dialect.complete(input),
    release: (input) => dialect.release(input),
    get: (scope, key) => dialect.get(scope, key),

    inspect: async (scope, key) => (await dialect.inspect(scope, key))?.inspection,
    releaseKey: (scope, key, options) =>
      releaseKeyWith(scope, key, options, dialect.inspect, dialect.deletePinned),

    async sweep(options?: SweepOptions): Promise<number> {
      const { batchSize, limit, pauseMs, signal } = sweepOptionsOf(options)
      let deleted = 0
      while (deleted < limit && !signal?.aborted) {
        const size = Math.min(batchSize, limit - deleted)
        const count = await dialect.sweepBatch(size)
        deleted += count
        // A short batch means nothing expired is left (or the rest is locked by claims).
        if (count < size) break
        if (pauseMs > 0 && deleted < limit) await pauseUnlessAborted(pauseMs, signal)
      }
      return deleted
    },
  }
}

/** The error code of a driver error, wherever drizzle or the driver put it. */
export function driverErrorCode(error: unknown, pattern: RegExp): string | undefined {
  for (let current = error, depth = 0; current && depth < 5; depth++) {
    const code = (current as { code?: unknown }).code
    if (typeof code === 'string' && pattern.test(code)) return code
    current = (current as { cause?: unknown }).cause
  }
  return undefined
}

/** The SQLSTATE of a PostgreSQL driver error. */
export const postgresErrorCode = (error: unknown) => driverErrorCode(error, /^[0-9A-Z]{5}$/)
