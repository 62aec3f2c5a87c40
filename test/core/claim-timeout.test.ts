import { describe, expect, it, vi } from 'vitest'
import { createIdempotency, createMemoryStore, type IdempotencyEvent } from '../../src'
import type { IdempotencyStore } from '../../src/store'

/** A store whose claims never answer, as a driver queueing queries through an outage does. */
function hangingStore(): IdempotencyStore & { claims: number } {
  const store = createMemoryStore()
  const hanging = {
    ...store,
    claims: 0,
    claim: () => {
      hanging.claims++
      return new Promise<never>(() => {})
    },
  }
  return hanging
}

describe('claimTimeout', () => {
  it('answers 503 STORE_UNAVAILABLE when the store does not answer a claim in time, and the handler never runs', async () => {
    const store = hangingStore()
    const events: IdempotencyEvent[] = []
    const idempotency = createIdempotency({
      store,
      claimTimeout: '30ms',
      logger: { warn: () => {}, error: () => {} },
      onEvent: (event) => events.push(event),
    })
    const handler = vi.fn(async () => 'charged')
    await expect(
      idempotency.execute({ key: 'k', operation: 'charge', payload: {} }, handler),
    ).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE', status: 503 })
    expect(handler).not.toHaveBeenCalled()
    expect(store.claims).toBe(1)
    expect(events).toEqual([expect.objectContaining({ type: 'store-error', stage: 'claim' })])
  })

  it("with onStoreError 'fail-open', runs the handler unprotected once the claim times out", async () => {
    const idempotency = createIdempotency({
      store: hangingStore(),
      claimTimeout: 30,
      onStoreError: 'fail-open',
      logger: { warn: () => {}, error: () => {} },
    })
    const result = await idempotency.execute({ key: 'k', operation: 'charge' }, async () => 'ran')
    expect(result).toEqual({ value: 'ran', replayed: false })
  })

  it('leaves a store that answers in time alone', async () => {
    const idempotency = createIdempotency({ store: createMemoryStore(), claimTimeout: '5s' })
    const handler = vi.fn(async () => 'charged')
    await idempotency.execute({ key: 'k', operation: 'charge' }, handler)
    const retry = await idempotency.execute({ key: 'k', operation: 'charge' }, handler)
    expect(retry).toEqual({ value: 'charged', replayed: true })
    expect(handler).toHaveBeenCalledTimes(1)
  })

  it('rejects a claimTimeout that is not a duration when the engine is created', () => {
    expect(() =>
      createIdempotency({ store: createMemoryStore(), claimTimeout: '5 seconds' as never }),
    ).toThrow(/claimTimeout/)
  })
})
