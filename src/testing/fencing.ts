import { randomUUID } from 'node:crypto'
import { expect, it } from 'vitest'
import { type ConformanceContext, longMs, shortMs } from './context'

/** Fencing: complete and release act only under the current lease token, once. */
export function describeFencing(context: ConformanceContext): void {
  const { input, retry, claimed, complete, release, get, passStoreTime, store } = context

  it('complete records the outcome only under the current token, once', async () => {
    const first = input()
    const original = claimed(await store.claim(first)).record
    const stranger = { ...first, leaseToken: randomUUID() }
    expect(await complete(stranger, 'forged')).toBe(false)
    expect(await get(first)).toEqual(original)
    expect(await complete(first, 'outcome', 90_000)).toBe(true)
    const stored = (await get(first))!
    expect(stored).toMatchObject({ status: 'completed', response: 'outcome' })
    expect(stored.expiresAt).toBeGreaterThan(original.lockedUntil - longMs + 89_000)
    // A completed record is no longer in progress: a second complete is refused.
    expect(await complete(first, 'again')).toBe(false)
    expect(await get(first)).toEqual(stored)
  })

  it('release deletes an in-progress record only under the current token', async () => {
    const first = input()
    const original = claimed(await store.claim(first)).record
    expect(await release({ ...first, leaseToken: randomUUID() })).toBe(false)
    expect(await get(first)).toEqual(original)
    expect(await release(first)).toBe(true)
    expect(await get(first)).toBeUndefined()
    expect(await release(first)).toBe(false)
    // Released means absent: the next claim is a fresh one.
    const next = claimed(await store.claim(retry(first)))
    expect(next.takeover).toBe(false)
  })

  it('release never deletes a completed record', async () => {
    const first = input()
    await store.claim(first)
    await complete(first, 'kept')
    expect(await release(first)).toBe(false)
    expect(await get(first)).toMatchObject({ status: 'completed', response: 'kept' })
  })

  it('after a takeover, the old executor can neither complete nor release (fencing)', async () => {
    const old = input({ lockTimeoutMs: shortMs })
    const original = claimed(await store.claim(old)).record
    await passStoreTime(original.lockedUntil)
    const current = retry(old, { lockTimeoutMs: longMs })
    const takeover = claimed(await store.claim(current)).record
    expect(await complete(old, 'late outcome')).toBe(false)
    expect(await release(old)).toBe(false)
    expect(await get(old)).toEqual(takeover)
    expect(await complete(current, 'new outcome')).toBe(true)
    expect(await complete(old, 'late outcome')).toBe(false)
    expect(await get(old)).toMatchObject({ status: 'completed', response: 'new outcome' })
  })
}
