/**
 * Decoding the Redis store's script replies: strings (or Buffers when a client maps them so),
 * nil as null, integers as numbers, and stored records (see scripts.ts).
 */
import type { IdempotencyRecord } from '../../store'

export function text(value: unknown): string | null {
  if (typeof value === 'string') return value
  if (value === null || value === undefined) return null
  if (value instanceof Uint8Array) return Buffer.from(value).toString('utf8')
  return String(value)
}

export function toNumber(value: unknown, call: string): number {
  const number = typeof value === 'number' ? value : Number(text(value) ?? Number.NaN)
  // A record's expiry is never negative: -1 (no TTL) means someone removed it by hand.
  if (!(Number.isFinite(number) && number >= 0)) throw unexpectedReply(call, value)
  return number
}

export function toFlag(reply: unknown, call: string): boolean {
  if (reply === 1) return true
  if (reply === 0) return false
  const value = text(reply)
  if (value !== '0' && value !== '1') throw unexpectedReply(call, reply)
  return value === '1'
}

interface StoredHeader {
  status: unknown
  leaseToken: unknown
  leaseEndsBeforeExpiryMs: unknown
  takeover: unknown
  fingerprint: unknown
}

/**
 * A stored record (see scripts.ts): its header line, then '\n' and the response, if any, with
 * `expiresAt`, its key's expiry, read in the same script.
 */
export function toRecord(
  scope: string,
  key: string,
  stored: unknown,
  expiresAt: number,
  call: string,
): { record: IdempotencyRecord; takeover: boolean } {
  const value = text(stored)
  if (value === null) throw unexpectedReply(call, stored)
  const newline = value.indexOf('\n')
  let header: StoredHeader
  try {
    header = JSON.parse(newline === -1 ? value : value.slice(0, newline)) ?? {}
  } catch {
    throw unexpectedReply(call, stored)
  }
  const { status, leaseToken, leaseEndsBeforeExpiryMs, fingerprint } = header
  if (
    (status !== 'in_progress' && status !== 'completed') ||
    typeof leaseToken !== 'string' ||
    typeof fingerprint !== 'string' ||
    typeof leaseEndsBeforeExpiryMs !== 'number'
  ) {
    throw unexpectedReply(call, stored)
  }
  return {
    record: {
      scope,
      key,
      fingerprint,
      status,
      response: newline === -1 ? null : value.slice(newline + 1),
      leaseToken,
      lockedUntil: expiresAt - leaseEndsBeforeExpiryMs,
      expiresAt,
    },
    takeover: header.takeover === true,
  }
}

export function unexpectedReply(call: string, reply: unknown): Error {
  return new Error(
    `idempotent-mutations: unexpected reply from the Redis ${call} script: ${JSON.stringify(reply)?.slice(0, 200)}`,
  )
}
