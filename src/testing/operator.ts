import { expect, it } from 'vitest'
import { type ConformanceContext, longMs, shortMs } from './context'

/**
 * The operator's calls: `inspect` reads a record without changing it, `releaseKey` deletes one on
 * purpose, fenced against a live executor unless forced. A store without them skips these cases.
 */
export function describeOperatorCalls(context: ConformanceContext): void {
  const { input, retry, claimed, refused, complete, get, passStoreTime, store, operator } = context

  it('inspect answers undefined for a key that was never claimed', async (test) => {
    expect(await operator(test).inspect('no-scope', 'no-key')).toBeUndefined()
  })

  it('inspect shows an in-progress record: its lease deadline, expiry and the store clock, and changes nothing', async (test) => {
    const ops = operator(test)
    const first = input({ lockTimeoutMs: 30_000, ttlMs: 90_000 })
    const { record } = claimed(await store.claim(first))
    const inspection = await ops.inspect(first.scope, first.key)
    expect(inspection).toEqual({
      scope: first.scope,
      key: first.key,
      status: 'in_progress',
      fingerprint: first.fingerprint,
      lockedUntil: record.lockedUntil,
      expiresAt: record.expiresAt,
      now: expect.any(Number),
      responseBytes: null,
    })
    // The store's clock, read after the claim and before the lease ends.
    expect(inspection!.now).toBeGreaterThanOrEqual(record.lockedUntil - 30_001)
    expect(inspection!.now).toBeLessThan(record.lockedUntil)
    expect(await get(first)).toEqual(record)
  })

  it('inspect shows a completed record without a lease, and its response size in bytes', async (test) => {
    const ops = operator(test)
    const responses: [string | null, number | null][] = [
      ['{"json":"café €"}', Buffer.byteLength('{"json":"café €"}')],
      ['', 0],
      [null, null],
    ]
    for (const [response, bytes] of responses) {
      const first = input()
      await store.claim(first)
      expect(await complete(first, response)).toBe(true)
      const stored = (await get(first))!
      expect(await ops.inspect(first.scope, first.key)).toMatchObject({
        status: 'completed',
        lockedUntil: undefined,
        expiresAt: stored.expiresAt,
        responseBytes: bytes,
      })
      expect(await get(first)).toEqual(stored)
    }
  })

  it('releaseKey leaves an in-progress record under a live lease alone unless forced; the forced executor can no longer complete', async (test) => {
    const ops = operator(test)
    const first = input()
    const { record } = claimed(await store.claim(first))
    const refusal = await ops.releaseKey(first.scope, first.key)
    expect(refusal).toMatchObject({
      released: false,
      reason: 'lease-held',
      record: { status: 'in_progress', lockedUntil: record.lockedUntil },
    })
    expect(await get(first)).toEqual(record)
    const forced = await ops.releaseKey(first.scope, first.key, { force: true })
    expect(forced).toMatchObject({ released: true, record: { status: 'in_progress' } })
    expect(await get(first)).toBeUndefined()
    // Its executor lost the lease: its outcome is not recorded, and a retry runs anew.
    expect(await complete(first, 'late outcome')).toBe(false)
    expect(claimed(await store.claim(retry(first))).takeover).toBe(false)
  })

  it('releaseKey deletes an in-progress record whose lease ran out, without force', async (test) => {
    const ops = operator(test)
    const first = input({ lockTimeoutMs: shortMs })
    const { record } = claimed(await store.claim(first))
    await passStoreTime(record.lockedUntil)
    expect(await ops.releaseKey(first.scope, first.key)).toMatchObject({
      released: true,
      record: { status: 'in_progress', lockedUntil: record.lockedUntil },
    })
    expect(await get(first)).toBeUndefined()
  })

  it('releaseKey deletes a completed record: the next claim of the key is a fresh one, with any payload', async (test) => {
    const ops = operator(test)
    const first = input()
    await store.claim(first)
    await complete(first, 'recorded', longMs)
    expect(refused(await store.claim(retry(first))).record.status).toBe('completed')
    expect(await ops.releaseKey(first.scope, first.key)).toMatchObject({
      released: true,
      record: { status: 'completed', responseBytes: 8 },
    })
    expect(await get(first)).toBeUndefined()
    const next = claimed(await store.claim(retry(first, { fingerprint: 'fingerprint-b' })))
    expect(next.takeover).toBe(false)
  })

  it('releaseKey of a key that has no record answers absent', async (test) => {
    const ops = operator(test)
    expect(await ops.releaseKey('no-scope', 'no-key')).toEqual({
      released: false,
      reason: 'absent',
    })
    expect(await ops.releaseKey('no-scope', 'no-key', { force: true })).toEqual({
      released: false,
      reason: 'absent',
    })
  })

  it(`${context.concurrency} concurrent forced releases of one record: exactly one deletes it, and a claim made meanwhile survives`, async (test) => {
    const ops = operator(test)
    const first = input()
    await store.claim(first)
    await complete(first, 'recorded')
    const results = await Promise.all(
      Array.from({ length: context.concurrency }, () =>
        ops.releaseKey(first.scope, first.key, { force: true }),
      ),
    )
    expect(results.filter((result) => result.released)).toHaveLength(1)
    for (const result of results) {
      if (!result.released) expect(result).toEqual({ released: false, reason: 'absent' })
    }
    // The next claim holds a live lease again: a release without force leaves it.
    const next = retry(first)
    claimed(await store.claim(next))
    const late = await ops.releaseKey(first.scope, first.key)
    expect(late).toMatchObject({ released: false, reason: 'lease-held' })
    expect(await get(first)).toMatchObject({ status: 'in_progress', leaseToken: next.leaseToken })
  })
}
