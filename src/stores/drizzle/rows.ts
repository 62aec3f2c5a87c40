import type { ClaimInput, IdempotencyRecord, RecordStatus } from '../../store'
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

/**
 * A claim row from a row that holds a whole record as it stands after the claim's statement
 * (`fingerprint, status, response, lease_token, locked_until, expires_at, now`), as the MySQL
 * and SQLite claims return it: the caller's lease token in it means the claim won.
 */
export function claimRowOfRecord(
  row: Row | undefined,
  input: ClaimInput,
  won: 1 | 2 = 1,
): ClaimRow | undefined {
  if (row === undefined) return undefined
  const [fingerprint, status, response, leaseToken, lockedUntil, expiresAt, now] = row
  return {
    state: leaseToken === input.leaseToken ? won : 0,
    fingerprint: fingerprint as string,
    status: status as RecordStatus,
    response: response as string | null,
    leaseToken: leaseToken as string,
    lockedUntil: Number(lockedUntil),
    expiresAt: Number(expiresAt),
    now: Number(now),
  }
}

/** The record `get` selects: `scope, key, fingerprint, status, response, lease_token, locked_until, expires_at`. */
export function recordOf(row: Row | undefined): IdempotencyRecord | undefined {
  if (row === undefined) return undefined
  const [scope, key, fingerprint, status, response, leaseToken, lockedUntil, expiresAt] = row
  return {
    scope: scope as string,
    key: key as string,
    fingerprint: fingerprint as string,
    status: status as RecordStatus,
    response: response as string | null,
    leaseToken: leaseToken as string,
    lockedUntil: Number(lockedUntil),
    expiresAt: Number(expiresAt),
  }
}
