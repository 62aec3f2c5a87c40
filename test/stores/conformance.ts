import { randomUUID } from 'node:crypto'
import { beforeEach, describe, expect, it } from 'vitest'
import type { ClaimInput, ClaimResult, IdempotencyRecord, IdempotencyStore } from '../../src'
import { describeReplayFidelity } from './fidelity'

/** A clock a test moves by hand; hand `now` to the store under test. */
export interface TestClock {
  now(): number
  advance(ms: number): void
}

export function createTestClock(start = Date.UTC(2030, 0, 1)): TestClock {
  let at = start
  return {
    now: () => at,
    advance: (ms) => {
      at += ms
    },
  }
}

export interface StoreConformanceOptions {
  /** Names the describe block. Put `[postgres]` in it for a real-Postgres run (CI checks it). */
  name: string
  /**
   * Returns the store under test, empty. Called before every test, so a test's records (and
   * its sweep) never meet another test's: give each call its own table, prefix or instance.
   */
  createStore(): IdempotencyStore | Promise<IdempotencyStore>
  /**
   * The clock the store reads, for stores with an injectable clock (memory): the suite moves
   * it to expire leases and records. Leave it out for stores with a server clock (Postgres,
   * Redis): the suite then uses 50 ms leases and TTLs and polls the store's own `now` (the one
   * a refused claim reports) until it has passed the deadline; it never asserts durations.
   */
  clock?: TestClock
  /** How many callers race on one key in the race tests (SPEC's acceptance is at least 100). */
  concurrency: number
  /**
   * The store deletes records itself at `expiresAt` (Redis TTLs), so `sweep()` has nothing to
   * do: the sweep case then checks that expired records are gone and `sweep()` returns 0.
   * @default false
   */
  selfExpiring?: boolean
}

/** Short enough to wait out on a real server clock, long enough to mean something. */
const shortMs = 50
const longMs = 60 * 60 * 1000

/**
 * The store contract of src/store.ts, as one table of behaviours every store must pass: each
 * SPEC row a store decides (claim, replay, mismatch, lease, takeover, expiry, fencing, sweep)
 * and the races (many concurrent claimers of one key).
 */
export function describeStoreConformance(options: StoreConformanceOptions): void {
  const { clock, concurrency } = options

  describe(`store conformance: ${options.name}`, () => {
    let store: IdempotencyStore
    beforeEach(async () => {
      store = await options.createStore()
    })

    /** A claim of a fresh (scope, key) unless overridden; tokens are always new. */
    const input = (overrides: Partial<ClaimInput> = {}): ClaimInput => ({
      scope: JSON.stringify(['tenant', 'orders.create']),
      key: `key-${randomUUID()}`,
      fingerprint: 'fingerprint-a',
      leaseToken: randomUUID(),
      lockTimeoutMs: longMs,
      ttlMs: longMs,
      ...overrides,
    })
    const retry = (first: ClaimInput, overrides: Partial<ClaimInput> = {}): ClaimInput => ({
      ...first,
      leaseToken: randomUUID(),
      ...overrides,
    })
    const claimed = (result: ClaimResult) => {
      if (!result.claimed) throw new Error('expected the claim to win')
      return result
    }
    const refused = (result: ClaimResult) => {
      if (result.claimed) throw new Error('expected the claim to be refused')
      return result
    }
    const complete = (from: ClaimInput, response: string | null, ttlMs = longMs) =>
      store.complete({
        scope: from.scope,
        key: from.key,
        leaseToken: from.leaseToken,
        response,
        ttlMs,
      })
    const release = (from: ClaimInput) =>
      store.release({ scope: from.scope, key: from.key, leaseToken: from.leaseToken })
    const get = (from: ClaimInput) => store.get(from.scope, from.key)

    /** Lets the store's clock pass `deadline` (epoch ms on the store's clock). */
    async function passStoreTime(deadline: number): Promise<void> {
      if (clock) {
        clock.advance(Math.max(0, deadline - clock.now()) + 1)
        return
      }
      // The store reports its clock on a refused claim: hold a long lease on a probe key and
      // claim it again until the reported time is past the deadline.
      const probe = input({ scope: 'conformance-clock', key: randomUUID(), fingerprint: 'probe' })
      const first = claimed(await store.claim(probe))
      let now = first.record.lockedUntil - probe.lockTimeoutMs
      while (now <= deadline) {
        await new Promise((resolve) => setTimeout(resolve, 5))
        now = refused(await store.claim(retry(probe))).now
      }
    }

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
      const claims = Array.from({ length: concurrency }, () =>
        retry(old, { lockTimeoutMs: longMs }),
      )
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

    describeReplayFidelity(() => store, clock?.now)
  })
}
