import { afterAll, describe, expect, it, vi } from 'vitest'
import { createIdempotency, createMemoryStore, type IdempotencyEvent } from '../../src'
import { Telemetry } from '../../src/telemetry'
import { createRecordingSdk } from './sdk'

/**
 * No SDK registered: the API's global providers are no-ops. The library makes no trace of its
 * operations (not even a span that records nothing) and behaves as it does without telemetry.
 */
describe('without an SDK registered', () => {
  // An SDK that exists but is not registered: nothing may reach it.
  const unregistered = createRecordingSdk({ register: false })
  afterAll(() => unregistered.shutdown())

  it('records nothing, starts no trace, and answers as usual', async () => {
    const start = vi.spyOn(Telemetry.prototype, 'start')
    const events: IdempotencyEvent['type'][] = []
    const idempotency = createIdempotency({
      store: createMemoryStore(),
      onEvent: (event) => events.push(event.type),
    })
    const request = { key: 'k-quiet', operation: 'payments.charge', payload: { amount: 5 } }
    expect(await idempotency.execute(request, () => 'charged')).toEqual({
      value: 'charged',
      replayed: false,
    })
    expect(await idempotency.execute(request, () => 'charged twice')).toEqual({
      value: 'charged',
      replayed: true,
    })
    expect(events).toEqual(['executed', 'replayed'])
    expect(start).toHaveBeenCalledTimes(2)
    for (const { value } of start.mock.results) expect(value).toBeUndefined()
    expect(unregistered.spans()).toEqual([])
    expect(await unregistered.points('idempotency.operations')).toEqual([])
  })

  it('picks up an SDK registered after the engine was created', async () => {
    const idempotency = createIdempotency({ store: createMemoryStore() })
    await idempotency.execute({ key: 'k-before', operation: 'op' }, () => 1)
    const sdk = createRecordingSdk({ register: true })
    try {
      await idempotency.execute({ key: 'k-after', operation: 'op' }, () => 1)
      expect(sdk.spans().map((span) => span.name)).toContain('idempotency op')
      expect(await sdk.points('idempotency.operations')).toHaveLength(1)
    } finally {
      await sdk.shutdown()
    }
  })
})
