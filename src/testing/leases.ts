import { expect, it } from 'vitest'
import { type ConformanceContext, longMs, shortMs } from './context'

/** Leases and expiry: a lapsed lease is taken over by the same payload only; an expired record counts as absent. */
export function describeLeases(context: ConformanceContext): void {
  const { input, retry, claimed, refused, complete, get, passStoreTime, store } = context

  it('an expired lease with the same fingerprint is taken over under the new token', async () => {
    const first = input({ lockTimeoutMs: shortMs })
    const original = claimed(await store.claim(first)).record
    await passStoreTime(original.lockedUntil)
    const second = retry(first, { lockTimeoutMs: longMs })
    const takeover = claimed(await store.claim(second))
    expect(takeover.takeover).toBe(true)
    expect(takeover.record).toMatchObject({
      status: 'in_progress',
      leaseToken: second.leaseToken,
      fingerprint: first.fingerprint,
      response: null,
    })
    expect(takeover.record.lockedUntil).toBeGreaterThan(original.lockedUntil)
    expect(await get(first)).toEqual(takeover.record)
  })

  it('an expired lease with another fingerprint is not taken over (a reused key)', async () => {
    const first = input({ lockTimeoutMs: shortMs })
    const original = claimed(await store.claim(first)).record
    await passStoreTime(original.lockedUntil)
    const other = refused(await store.claim(retry(first, { fingerprint: 'fingerprint-b' })))
    expect(other.record).toEqual(original)
    expect(other.now).toBeGreaterThanOrEqual(original.lockedUntil)
    expect(await get(first)).toEqual(original)
  })

  it('a completed record past expires_at is claimed as if absent, by any payload, and is no takeover', async () => {
    const first = input()
    await store.claim(first)
    await complete(first, 'old outcome', shortMs)
    const completed = (await get(first))!
    await passStoreTime(completed.expiresAt)
    const fresh = retry(first, { fingerprint: 'fingerprint-b' })
    const result = claimed(await store.claim(fresh))
    expect(result.takeover).toBe(false)
    expect(result.record).toMatchObject({
      status: 'in_progress',
      response: null,
      fingerprint: 'fingerprint-b',
      leaseToken: fresh.leaseToken,
    })
  })

  it('an in-progress record past expires_at is claimed as if absent', async () => {
    const first = input({ lockTimeoutMs: shortMs, ttlMs: shortMs })
    const original = claimed(await store.claim(first)).record
    await passStoreTime(Math.max(original.expiresAt, original.lockedUntil))
    const result = claimed(await store.claim(retry(first, { fingerprint: 'fingerprint-b' })))
    expect(result.takeover).toBe(false)
    expect(result.record.fingerprint).toBe('fingerprint-b')
  })
}
