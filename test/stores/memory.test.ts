import { describe, expect, it } from 'vitest'
import { createMemoryStore } from '../../src'
import { createTestClock, describeStoreConformance } from './conformance'

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
