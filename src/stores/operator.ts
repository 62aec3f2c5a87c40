import type {
  IdempotencyRecord,
  RecordInspection,
  RecordStatus,
  ReleaseKeyOptions,
  ReleaseKeyResult,
} from '../store'

/** A record as `inspect` reports it, with the lease token a pinned delete needs. */
export interface PinnedInspection {
  inspection: RecordInspection
  leaseToken: string
}

/** What a pinned delete names: the record of (scope, key) under this token, in this status. */
export interface PinnedRecord {
  scope: string
  key: string
  leaseToken: string
  status: RecordStatus
}

/** What a store read of one record, pinned to the lease token it carries. */
export function pinnedInspection(
  record: Pick<IdempotencyRecord, 'scope' | 'key' | 'status' | 'fingerprint' | 'leaseToken'> & {
    lockedUntil: number
  },
  read: { expiresAt: number; now: number; responseBytes: number | null },
): PinnedInspection {
  const { scope, key, status, fingerprint, lockedUntil, leaseToken } = record
  return {
    inspection: {
      scope,
      key,
      status,
      fingerprint,
      lockedUntil: status === 'in_progress' ? lockedUntil : undefined,
      ...read,
    },
    leaseToken,
  }
}

/** Whether an executor may still be running under the record's lease, on the store's clock. */
export function leaseIsLive(record: RecordInspection): boolean {
  return (
    record.status === 'in_progress' &&
    record.lockedUntil !== undefined &&
    record.lockedUntil > record.now &&
    record.expiresAt > record.now
  )
}

// Each turn reads a newer record (completed, taken over or claimed anew since the last read);
// ten in a row would take a key claimed and released continuously.
const maxReleaseAttempts = 10

/**
 * `releaseKey` for a store that can read a record and delete it pinned to its token and status:
 * the decision is made on what `read` saw, and the delete matches only that same record (a
 * completion changes the status, a takeover or a new claim the token; no call changes a record
 * without changing one of them). A delete that matched nothing reads again.
 */
export async function releaseKeyWith(
  scope: string,
  key: string,
  options: ReleaseKeyOptions | undefined,
  read: (scope: string, key: string) => Promise<PinnedInspection | undefined>,
  deletePinned: (record: PinnedRecord) => Promise<boolean>,
): Promise<ReleaseKeyResult> {
  const force = options?.force === true
  for (let attempt = 0; attempt < maxReleaseAttempts; attempt++) {
    const found = await read(scope, key)
    if (found === undefined) return { released: false, reason: 'absent' }
    const { inspection, leaseToken } = found
    if (!force && leaseIsLive(inspection)) {
      return { released: false, reason: 'lease-held', record: inspection }
    }
    if (await deletePinned({ scope, key, leaseToken, status: inspection.status })) {
      return { released: true, record: inspection }
    }
  }
  throw new Error(
    `idempotent-mutations: releaseKey found the record changed ${maxReleaseAttempts} times in a row (constant concurrent claims of one key)`,
  )
}
