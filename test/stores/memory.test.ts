import { createTestClock, describeStoreConformance } from 'idempotent-mutations/testing'
import { describe, expect, it } from 'vitest'
import { createIdempotency, createMemoryStore } from '../../src'

const clock = createTestClock()

describeStoreConformance({
  name: 'memory',
  clock,
  createStore: () => createMemoryStore({ now: clock.now }),
  concurrency: 200,
})

describe('memory store limits', () => {
  it('evicts expired, then completed records when full, but never a valid lease', async () => {
    const store = createMemoryStore({ now: clock.now, maxRecords: 2 })
    const claim = (key: string) =>
      store.claim({
        scope: 's',
        key,
        fingerprint: 'f',
        leaseToken: key,
        lockTimeoutMs: 60_000,
        ttlMs: 60_000,
      })
    await claim('a')
    await store.complete({ scope: 's', key: 'a', leaseToken: 'a', response: 'r', ttlMs: 60_000 })
    await claim('b')
    expect((await claim('c')).claimed).toBe(true)
    expect(await store.get('s', 'a')).toBeUndefined()
    expect(await store.get('s', 'b')).toMatchObject({ status: 'in_progress' })
    await expect(claim('d')).rejects.toThrow(/full/)
    expect(await store.get('s', 'd')).toBeUndefined()
  })

  it('rejects a maxRecords that is not a positive integer', () => {
    expect(() => createMemoryStore({ maxRecords: 0 })).toThrow(TypeError)
    expect(() => createMemoryStore({ maxRecords: 1.5 })).toThrow(TypeError)
  })
})

describe('memory store bookkeeping across scopes', () => {
  const input = (scope: string, key: string) => ({
    scope,
    key,
    fingerprint: 'f',
    leaseToken: `${scope}/${key}`,
    lockTimeoutMs: 60_000,
    ttlMs: 60_000,
  })
  const complete = (scope: string, key: string) => ({
    ...input(scope, key),
    response: 'r',
    ttlMs: 60_000,
  })

  it('sweep checks its options as every store does (a pause, if nothing to pace), through the engine too', async () => {
    const store = createMemoryStore()
    await expect(store.sweep({ pause: 'soon' as never })).rejects.toThrow(/sweep's pause must be/)
    await expect(store.sweep({ batchSize: 0 })).rejects.toThrow(TypeError)
    const idempotency = createIdempotency({ store })
    await expect(idempotency.sweep({ limit: -1 })).rejects.toThrow(/sweep's limit must be/)
    expect(await idempotency.sweep({ batchSize: 10, pause: '5ms' })).toBe(0)
  })

  it('counts records of every scope against maxRecords, and frees a slot on release and sweep', async () => {
    const local = createTestClock()
    const store = createMemoryStore({ now: local.now, maxRecords: 3 })
    await store.claim(input('a', '1'))
    await store.claim(input('b', '1'))
    await store.claim(input('b', '2'))
    // Full of valid leases, whichever scope they are in.
    await expect(store.claim(input('c', '1'))).rejects.toThrow(/full/)
    expect(await store.release(input('b', '1'))).toBe(true)
    expect((await store.claim(input('c', '1'))).claimed).toBe(true)
    await expect(store.claim(input('c', '2'))).rejects.toThrow(/full/)

    // Completed records are evicted for new claims, scope by scope; leases stay.
    expect(await store.complete(complete('a', '1'))).toBe(true)
    expect(await store.complete(complete('c', '1'))).toBe(true)
    expect((await store.claim(input('d', '1'))).claimed).toBe(true)
    expect((await store.claim(input('d', '2'))).claimed).toBe(true)
    expect(await store.get('a', '1')).toBeUndefined()
    expect(await store.get('c', '1')).toBeUndefined()
    expect(await store.get('b', '2')).toMatchObject({ status: 'in_progress' })

    // Expired records are swept (not by a sweep already stopped), and their slots count as
    // free again.
    local.advance(120_000)
    expect(await store.sweep({ signal: AbortSignal.abort() })).toBe(0)
    expect(await store.sweep()).toBe(3)
    for (const key of ['1', '2', '3']) {
      expect((await store.claim(input('e', key))).claimed).toBe(true)
    }
    await expect(store.claim(input('e', '4'))).rejects.toThrow(/full/)
  })

  it('keeps the same key in two scopes as two records', async () => {
    const store = createMemoryStore({ now: clock.now })
    await store.claim(input('a', 'k'))
    expect((await store.claim(input('b', 'k'))).claimed).toBe(true)
    await store.complete(complete('a', 'k'))
    expect(await store.get('a', 'k')).toMatchObject({ status: 'completed' })
    expect(await store.get('b', 'k')).toMatchObject({ status: 'in_progress' })
  })
})

describe("memory store and the engine's clock", () => {
  const input = (key: string) => ({
    scope: 's',
    key,
    fingerprint: 'f',
    leaseToken: `${key}-token`,
    lockTimeoutMs: 1_000,
    ttlMs: 60_000,
  })
  const fakeClock = (start: number) => {
    const state = { at: start }
    return { state, now: () => state.at }
  }

  it('without a clock of its own, follows the now of the engine created over it (SPEC)', async () => {
    const time = fakeClock(Date.UTC(2031, 0, 1))
    const store = createMemoryStore()
    const idempotency = createIdempotency({ store, now: time.now, ttl: 5_000, lockTimeout: 1_000 })
    const claim = await store.claim(input('direct'))
    expect(claim.record).toMatchObject({
      lockedUntil: time.state.at + 1_000,
      expiresAt: time.state.at + 60_000,
    })

    // Through the engine: a completed record lives ttl on the engine's clock, not the wall's.
    let runs = 0
    const request = { key: 'k', operation: 'op', payload: {} }
    await idempotency.execute(request, async () => ++runs)
    time.state.at += 4_999
    expect(await idempotency.execute(request, async () => ++runs)).toEqual({
      value: 1,
      replayed: true,
    })
    time.state.at += 1
    expect(await idempotency.execute(request, async () => ++runs)).toEqual({
      value: 2,
      replayed: false,
    })

    // A lease ends lockTimeout later on the same clock: then the same payload takes it over.
    const held = idempotency.begin({ key: 'held', operation: 'op', payload: {} })
    expect((await held).kind).toBe('execute')
    await expect(idempotency.begin({ key: 'held', operation: 'op', payload: {} })).rejects.toThrow(
      expect.objectContaining({ code: 'IN_PROGRESS' }),
    )
    time.state.at += 1_000
    const takeover = await idempotency.begin({ key: 'held', operation: 'op', payload: {} })
    expect(takeover).toMatchObject({ kind: 'execute', lease: { takeover: true } })
  })

  it('keeps a clock given to the store itself, and Date.now when neither has one', async () => {
    const own = fakeClock(Date.UTC(2032, 0, 1))
    const store = createMemoryStore({ now: own.now })
    createIdempotency({ store, now: () => 0 })
    expect((await store.claim(input('own'))).record.lockedUntil).toBe(own.state.at + 1_000)

    const plain = createMemoryStore()
    createIdempotency({ store: plain })
    const before = Date.now()
    const { lockedUntil } = (await plain.claim(input('wall'))).record
    expect(lockedUntil).toBeGreaterThanOrEqual(before + 1_000)
    expect(lockedUntil).toBeLessThanOrEqual(Date.now() + 1_000)
  })

  it('refuses a second engine with another clock over the same store, Date.now included, and takes the same clock again', () => {
    const time = fakeClock(0)
    const store = createMemoryStore()
    createIdempotency({ store, now: time.now })
    expect(() => createIdempotency({ store, now: time.now })).not.toThrow()
    // An engine without `now` runs on Date.now, which this store does not follow.
    expect(() => createIdempotency({ store })).toThrow(/already follows another engine's clock/)
    expect(() => createIdempotency({ store, now: () => 1 })).toThrow(
      /already follows another engine's clock/,
    )
    // Engines without `now` share Date.now.
    const shared = createMemoryStore()
    createIdempotency({ store: shared })
    expect(() => createIdempotency({ store: shared })).not.toThrow()
  })

  it('is left untouched by an engine refused for another option', () => {
    const store = createMemoryStore()
    expect(() =>
      createIdempotency({ store, now: () => 1, replayCache: { maxAge: 'soon' as never } }),
    ).toThrow(TypeError)
    expect(() => createIdempotency({ store, now: () => 2 })).not.toThrow()
  })

  it('refuses a now that is not a function', () => {
    expect(() =>
      createIdempotency({ store: createMemoryStore(), now: 5 as unknown as () => number }),
    ).toThrow(TypeError)
  })
})
