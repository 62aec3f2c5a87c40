import type { ClaimInput, IdempotencyRecord } from '../store'

/**
 * The record a claim of `input` writes: in progress under its lease token, no response yet.
 * For stores: what `claim` answers with `claimed: true`.
 */
export function claimedRecord(
  input: ClaimInput,
  lockedUntil: number,
  expiresAt: number,
): IdempotencyRecord {
  return {
    scope: input.scope,
    key: input.key,
    fingerprint: input.fingerprint,
    status: 'in_progress',
    response: null,
    leaseToken: input.leaseToken,
    lockedUntil,
    expiresAt,
  }
}
