import { expect, it } from 'vitest'
import type { ConformanceContext } from './context'

/** Claims: a first claim, a refused one, replays, and claims with another fingerprint. */
export function describeClaims(context: ConformanceContext): void {
  const { input, retry, claimed, refused, complete, get, store } = context

  it('a first claim writes an in-progress record under the caller token, without a body', async () => {
    const first = input({ lockTimeoutMs: 30_000, ttlMs: 90_000 })
    const result = claimed(await store.claim(first))
    expect(result.takeover).toBe(false)
    expect(result.record).toMatchObject({
      scope: first.scope,
      key: first.key,
      fingerprint: first.fingerprint,
      status: 'in_progress',
      response: null,
      leaseToken: first.leaseToken,
    })
    // Both times come from one clock reading: they differ by ttl - lockTimeout.
    expect(result.record.expiresAt - result.record.lockedUntil).toBeGreaterThanOrEqual(59_999)
    expect(result.record.expiresAt - result.record.lockedUntil).toBeLessThanOrEqual(60_001)
    expect(await get(first)).toEqual(result.record)
  })

  it('get answers undefined for a key that was never claimed', async () => {
    expect(await store.get('no-scope', 'no-key')).toBeUndefined()
  })

  it('a claim under a valid lease is refused with the standing record and the store clock', async () => {
    const first = input()
    const winner = claimed(await store.claim(first))
    const second = refused(await store.claim(retry(first)))
    expect(second.record).toEqual(winner.record)
    expect(second.now).toBeLessThan(winner.record.lockedUntil)
    expect(await get(first)).toEqual(winner.record)
  })

  it('a completed record is returned as it stands for a replay, response included', async () => {
    const first = input()
    await store.claim(first)
    expect(await complete(first, '{"json":{"id":1}}')).toBe(true)
    const stored = await get(first)
    expect(stored).toMatchObject({ status: 'completed', response: '{"json":{"id":1}}' })
    const replay = refused(await store.claim(retry(first)))
    expect(replay.record).toEqual(stored)
    expect(typeof replay.now).toBe('number')
  })

  it('a record completed without a body keeps response null and is never claimed again while it counts', async () => {
    const first = input()
    await store.claim(first)
    expect(await complete(first, null)).toBe(true)
    const again = refused(await store.claim(retry(first)))
    expect(again.record).toMatchObject({ status: 'completed', response: null })
  })

  it('a claim with another fingerprint leaves a completed record untouched', async () => {
    const first = input()
    await store.claim(first)
    await complete(first, 'done')
    const before = await get(first)
    const other = refused(await store.claim(retry(first, { fingerprint: 'fingerprint-b' })))
    expect(other.record).toEqual(before)
    expect(await get(first)).toEqual(before)
  })

  it('a claim with another fingerprint leaves an in-progress record untouched', async () => {
    const first = input()
    await store.claim(first)
    const before = await get(first)
    const other = refused(await store.claim(retry(first, { fingerprint: 'fingerprint-b' })))
    expect(other.record).toEqual(before)
    expect(await get(first)).toEqual(before)
  })
}
