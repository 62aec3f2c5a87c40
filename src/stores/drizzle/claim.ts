import type { ClaimInput, ClaimResult } from '../../store'
import { claimedRecord } from '../record'
import { type ClaimRow, standingRecord } from './rows'

/**
 * Whether a standing record the first phase read may be claimed after all, which only the
 * claim under the row lock decides: it expired, or it is in progress, its lease is over and
 * the payload is the same (a takeover). Times are whole milliseconds, floored, from one
 * statement's clock: a record that SQL holds still live by less than a millisecond reads as
 * over here, which costs the second statement and changes no answer. Keep it in step with each
 * dialect's claim under the lock: a case only that statement allows would never be claimed.
 */
export function claimsUnderLock(row: ClaimRow, fingerprint: string): boolean {
  return (
    row.expiresAt <= row.now ||
    (row.status === 'in_progress' && row.lockedUntil <= row.now && row.fingerprint === fingerprint)
  )
}

// How often a claim re-runs when it read nothing (see claimInPhases); each re-run sees a newer
// snapshot, so the second one practically always answers.
const maxClaimAttempts = 10

/** The two phases of a claim on one dialect (and, for PostgreSQL, in one transaction). */
export interface ClaimPhases {
  /**
   * Inserts a fresh in-progress record, or reads the one that stands (the first attempt may
   * differ from the later ones: transactional mode bounds its wait there). Undefined when it
   * read no row: a concurrent claim inserted the record after this statement's snapshot, or
   * released it between two statements.
   */
  insertOrRead(attempt: number): Promise<ClaimRow | undefined>
  /**
   * Claims a record `standing` that {@link claimsUnderLock} allows (expired, or a lease that
   * ran out), deciding again under the row lock. Undefined when the record changed meanwhile.
   */
  underLock(standing: ClaimRow): Promise<ClaimRow | undefined>
}

/**
 * A claim, in phases, on every dialect. A record's life (times from the database's clock):
 *
 *   (absent) ──claim──▶ in_progress ──complete(token)──▶ completed ──expires_at──▶ (absent)
 *                        │    │                                                  ▲
 *                        │    └──release(token)──▶ (absent)                       │
 *                        └──locked_until passes, same fingerprint──▶ claim = takeover
 *
 * `insertOrRead` answers the claim, except for a record to overwrite or take over,
 * which `underLock` decides; a phase that read no row starts the claim again, and the next
 * snapshot has the record. `attempt` and `underLock` in the answer say which phase gave it
 * (transactional mode restores a setting unless the first one did).
 */
export async function claimInPhases(
  input: ClaimInput,
  phases: ClaimPhases,
): Promise<{ result: ClaimResult; attempt: number; underLock: boolean }> {
  for (let attempt = 1; attempt <= maxClaimAttempts; attempt++) {
    let row = await phases.insertOrRead(attempt)
    const locked = row?.state === 0 && claimsUnderLock(row, input.fingerprint)
    if (locked) row = await phases.underLock(row!)
    if (row === undefined) continue
    const result: ClaimResult =
      row.state > 0
        ? {
            claimed: true,
            takeover: row.state > 1,
            record: claimedRecord(input, row.lockedUntil, row.expiresAt),
          }
        : { claimed: false, record: standingRecord(input, row), now: row.now }
    return { result, attempt, underLock: locked }
  }
  throw new Error(
    `idempotent-mutations: the claim of a key read no record ${maxClaimAttempts} times in a row (constant concurrent release and claim of one key)`,
  )
}
