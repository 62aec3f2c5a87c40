import { randomUUID } from 'node:crypto'
import { expect, it } from 'vitest'
import { type ConformanceContext, shortMs } from './context'

/** Scopes and sweeping: unrelated records stay apart, expired ones are deleted in batches. */
export function describeSweep(context: ConformanceContext): void {
  const { input, retry, claimed, complete, get, passStoreTime, store, options } = context

  it('the same key under two scopes, or two keys under one scope, are unrelated records', async () => {
    const first = input()
    const otherScope = retry(first, { scope: JSON.stringify(['other-tenant', 'orders.create']) })
    const otherKey = retry(first, { key: `key-${randomUUID()}` })
    claimed(await store.claim(first))
    claimed(await store.claim(otherScope))
    claimed(await store.claim(otherKey))
    await complete(first, 'first')
    expect(await get(otherScope)).toMatchObject({ status: 'in_progress' })
    expect(await get(otherKey)).toMatchObject({ status: 'in_progress' })
  })

  it('sweep deletes only records past expires_at, batch by batch, and stops at limit', async () => {
    const expired = Array.from({ length: 5 }, () => input())
    const live = Array.from({ length: 2 }, () => input())
    const running = input()
    for (const claim of [...expired, ...live]) await store.claim(claim)
    await store.claim(running)
    let lastExpiry = 0
    for (const claim of expired) {
      await complete(claim, 'short-lived', shortMs)
      lastExpiry = Math.max(lastExpiry, (await get(claim))!.expiresAt)
    }
    for (const claim of live) await complete(claim, 'long-lived')
    await passStoreTime(lastExpiry)

    // A sweep whose signal has aborted deletes nothing.
    expect(await store.sweep({ signal: AbortSignal.abort() })).toBe(0)
    if (!options.selfExpiring) {
      for (const claim of expired) expect(await get(claim)).toBeDefined()
    }
    if (options.selfExpiring) {
      expect(await store.sweep()).toBe(0)
    } else {
      expect(await store.sweep({ batchSize: 2, limit: 3 })).toBe(3)
      expect(await store.sweep({ batchSize: 1 })).toBe(2)
      expect(await store.sweep()).toBe(0)
    }
    for (const claim of expired) expect(await get(claim)).toBeUndefined()
    for (const claim of live) expect(await get(claim)).toMatchObject({ response: 'long-lived' })
    expect(await get(running)).toMatchObject({ status: 'in_progress' })
  })
}
