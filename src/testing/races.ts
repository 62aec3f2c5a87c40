import { expect, it } from 'vitest'
import type { ClaimResult, IdempotencyRecord } from '../store'
import { type ConformanceContext, longMs, shortMs } from './context'

/** Races: many concurrent claimers of one key, of an expired lease, and of distinct keys. */
export function describeRaces(context: ConformanceContext): void {
  const { input, retry, claimed, complete, get, passStoreTime, store, concurrency } = context

  it(`${concurrency} concurrent claimers of one key: exactly one wins, every other one sees its record`, async () => {
    const first = input()
    const claims = Array.from({ length: concurrency }, () => retry(first))
    const results = await Promise.all(claims.map((claim) => store.claim(claim)))
    const winners = results.filter((result) => result.claimed)
    expect(winners).toHaveLength(1)
    const winnerToken = winners[0]!.record.leaseToken
    expect(claims.map((claim) => claim.leaseToken)).toContain(winnerToken)
    for (const result of results) {
      expect(result.record.leaseToken).toBe(winnerToken)
      expect(result.record.status).toBe('in_progress')
    }
    expect((await get(first))!.leaseToken).toBe(winnerToken)
  })

  it(`${concurrency} concurrent claimers of an expired lease: exactly one takes it over`, async () => {
    const first = input({ lockTimeoutMs: shortMs })
    const original = claimed(await store.claim(first)).record
    await passStoreTime(original.lockedUntil)
    const claims = Array.from({ length: concurrency }, () =>
      retry(first, { lockTimeoutMs: longMs }),
    )
    const results = await Promise.all(claims.map((claim) => store.claim(claim)))
    const winners = results.filter((result) => result.claimed)
    expect(winners).toHaveLength(1)
    expect(winners[0]).toMatchObject({ takeover: true })
    const winnerToken = winners[0]!.record.leaseToken
    for (const result of results) expect(result.record.leaseToken).toBe(winnerToken)
    expect(await complete(first, 'fenced off')).toBe(false)
  })

  it(`the old executor's late complete racing ${concurrency} takeover claims: the record stays consistent`, async () => {
    const old = input({ lockTimeoutMs: shortMs })
    const original = claimed(await store.claim(old)).record
    await passStoreTime(original.lockedUntil)
    const claims = Array.from({ length: concurrency }, () => retry(old, { lockTimeoutMs: longMs }))
    const [completedLate, ...results] = await Promise.all([
      complete(old, 'late outcome'),
      ...claims.map((claim) => store.claim(claim)),
    ])
    const winners = (results as ClaimResult[]).filter((result) => result.claimed)
    const stored = (await get(old)) as IdempotencyRecord
    if (completedLate) {
      // The late completion got there first: it stands, and nobody took the key over.
      expect(winners).toHaveLength(0)
      expect(stored).toMatchObject({ status: 'completed', response: 'late outcome' })
    } else {
      expect(winners).toHaveLength(1)
      expect(stored).toMatchObject({
        status: 'in_progress',
        leaseToken: winners[0]!.record.leaseToken,
      })
    }
  })

  it(`${concurrency} concurrent claims of distinct keys all win`, async () => {
    const claims = Array.from({ length: concurrency }, () => input())
    const results = await Promise.all(claims.map((claim) => store.claim(claim)))
    expect(results.every((result) => result.claimed)).toBe(true)
  })
}
