import { describe, expect, it } from 'vitest'
import type { Codec } from '../../src'
import { createHarness, deferred, storeDown } from './fixtures'

const operation = 'orders.create'

describe('engine: an event carries the code of the error its caller got', () => {
  it('a duplicate of an operation in flight: conflict with IN_PROGRESS', async () => {
    const { idempotency, events } = createHarness()
    const running = deferred()
    const first = idempotency.execute({ key: 'k', operation }, () => running.promise)
    const duplicate = await idempotency.execute({ key: 'k', operation }, () => 1).catch((e) => e)
    expect(duplicate).toMatchObject({ code: 'IN_PROGRESS' })
    expect(events).toContainEqual(
      expect.objectContaining({ type: 'conflict', code: 'IN_PROGRESS' }),
    )
    running.resolve()
    await first
  })

  it('a key reused with another payload: mismatch with KEY_REUSED', async () => {
    const { idempotency, events } = createHarness()
    await idempotency.execute({ key: 'k', operation, payload: 1 }, () => 'one')
    const reused = await idempotency
      .execute({ key: 'k', operation, payload: 2 }, () => 'two')
      .catch((e) => e)
    expect(reused).toMatchObject({ code: 'KEY_REUSED' })
    expect(events).toContainEqual(expect.objectContaining({ type: 'mismatch', code: 'KEY_REUSED' }))
  })

  it('a claim the store cannot answer: store-error with STORE_UNAVAILABLE, failing closed', async () => {
    const { idempotency, events } = createHarness({
      store: (memory) => ({ ...memory, claim: () => Promise.reject(storeDown()) }),
    })
    await expect(idempotency.execute({ key: 'k', operation }, () => 1)).rejects.toMatchObject({
      code: 'STORE_UNAVAILABLE',
    })
    expect(events).toEqual([
      expect.objectContaining({ type: 'store-error', stage: 'claim', code: 'STORE_UNAVAILABLE' }),
    ])
  })

  it('failing open, the caller gets no error and the store-error event no code', async () => {
    const { idempotency, events } = createHarness({
      onStoreError: 'fail-open',
      store: (memory) => ({ ...memory, claim: () => Promise.reject(storeDown()) }),
    })
    expect(await idempotency.execute({ key: 'k', operation }, () => 1)).toEqual({
      value: 1,
      replayed: false,
    })
    expect(events).toHaveLength(1)
    expect(events[0]).not.toHaveProperty('code')
  })

  it('a record that cannot be read back: not-stored with RESPONSE_NOT_STORED', async () => {
    const unreadable: Codec = { encode: (value) => JSON.stringify(value), decode: () => ({}) }
    const { idempotency, events } = createHarness({ codec: unreadable })
    await idempotency.execute({ key: 'k', operation }, () => 'done')
    await expect(idempotency.execute({ key: 'k', operation }, () => 'again')).rejects.toMatchObject(
      { code: 'RESPONSE_NOT_STORED' },
    )
    expect(events).toContainEqual(
      expect.objectContaining({ type: 'not-stored', code: 'RESPONSE_NOT_STORED' }),
    )
  })
})
