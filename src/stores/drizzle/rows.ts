import type { ClaimInput, IdempotencyRecord, RecordStatus } from '../../store'
import { type PinnedInspection, pinnedInspection } from '../operator'
import type { Row } from './runner'

/**
 * The rows every dialect's statements return, decoded. The statements select their columns in
 * these orders (see each dialect's sql.ts).
 */

/**
 * What a claim statement answers, on every dialect: `state` 0 when a standing record refused
 * the claim (its fields follow), 1 claimed, 2 claimed by takeover (then only the claimed
 * record's times count), and the server's `now`. Times are epoch milliseconds.
 */
export type ClaimRow = Omit<IdempotencyRecord, 'scope' | 'key'> & { state: number; now: number }

/** The record of `at`'s scope and key with `row`'s fields (a refused claim's standing record). */
export function standingRecord(
  at: Pick<IdempotencyRecord, 'scope' | 'key'>,
  row: Omit<IdempotencyRecord, 'scope' | 'key'>,
): IdempotencyRecord {
  return {
    scope: at.scope,
    key: at.key,
    fingerprint: row.fingerprint,
    status: row.status,
    response: row.response,
    leaseToken: row.leaseToken,
    lockedUntil: row.lockedUntil,
    expiresAt: row.expiresAt,
  }
}

/** A record's fields less scope and key, from `row` at `at` onwards, in the record's column order. */
function fieldsAt(row: Row, at: number): Omit<IdempotencyRecord, 'scope' | 'key'> {
  return {
    fingerprint: row[at] as string,
    status: row[at + 1] as RecordStatus,
    response: row[at + 2] as string | null,
    leaseToken: row[at + 3] as string,
    lockedUntil: Number(row[at + 4]),
    expiresAt: Number(row[at + 5]),
  }
}

/**
 * A claim row as PostgreSQL's claim statements return it: `state`, then the standing record's
 * fields (null when it claimed), then the server's `now`. Undefined for no row.
 */
export function claimRowOf(row: Row | undefined): ClaimRow | undefined {
  if (row === undefined) return undefined
  return { state: Number(row[0]), ...fieldsAt(row, 1), now: Number(row[7]) }
}

/**
 * A claim row from a row that holds a whole record as it stands after the claim's statement
 * (`fingerprint, status, response, lease_token, locked_until, expires_at, now`), as the MySQL
 * and SQLite claims return it: the caller's lease token in it means the claim won (`won`: 1,
 * or 2 for a takeover).
 */
export function claimRowOfRecord(
  row: Row | undefined,
  input: ClaimInput,
  won: 1 | 2 = 1,
): ClaimRow | undefined {
  if (row === undefined) return undefined
  const fields = fieldsAt(row, 0)
  return { state: fields.leaseToken === input.leaseToken ? won : 0, ...fields, now: Number(row[6]) }
}

/** The record `get` selects: `scope, key`, then the fields in the record's column order. */
export function recordOf(row: Row | undefined): IdempotencyRecord | undefined {
  if (row === undefined) return undefined
  return { scope: row[0] as string, key: row[1] as string, ...fieldsAt(row, 2) }
}

/**
 * What `inspect` selects on every dialect: `fingerprint, status, lease_token, locked_until,
 * expires_at, response_bytes, now` (times in epoch milliseconds, the response's size in bytes or
 * null), decoded; undefined for no row.
 */
export function inspectionOf(
  scope: string,
  key: string,
  row: Row | undefined,
): PinnedInspection | undefined {
  if (row === undefined) return undefined
  const record = {
    scope,
    key,
    status: row[1] as RecordStatus,
    fingerprint: row[0] as string,
    leaseToken: row[2] as string,
    lockedUntil: Number(row[3]),
  }
  return pinnedInspection(record, {
    expiresAt: Number(row[4]),
    now: Number(row[6]),
    responseBytes: row[5] === null || row[5] === undefined ? null : Number(row[5]),
  })
}
