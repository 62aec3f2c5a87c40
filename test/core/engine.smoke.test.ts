import { describe, expect, it, vi } from 'vitest'
import { createIdempotency, createMemoryStore, IdempotencyError } from '../../src'

describe('engine on the memory store', () => {
  it('runs a keyed operation once and replays it with Dates intact', async () => {
    const idempotency = createIdempotency({ store: createMemoryStore() })
    const handler = vi.fn(async () => ({ at: new Date(0), n: 10n, m: new Map([[1, 2]]) }))
    const request = { key: 'k1', operation: 'charge', payload: { a: 1, b: 2 } }
    const first = await idempotency.execute(request, handler)
    const second = await idempotency.execute({ ...request, payload: { b: 2, a: 1 } }, handler)
    expect(handler).toHaveBeenCalledTimes(1)
    expect(first.replayed).toBe(false)
    expect(second.replayed).toBe(true)
    expect(second.value).toEqual(first.value)
    expect(second.value.at).toBeInstanceOf(Date)
    await expect(
      idempotency.execute({ ...request, payload: { a: 2 } }, handler),
    ).rejects.toMatchObject({ code: 'KEY_REUSED', status: 422 })
  })

  it('answers a concurrent duplicate with 409 and Retry-After', async () => {
    const idempotency = createIdempotency({ store: createMemoryStore() })
    let finish!: () => void
    const gate = new Promise<void>((r) => {
      finish = r
    })
    const request = { key: 'k2', operation: 'charge' }
    const first = idempotency.execute(request, () => gate)
    const error = await idempotency.execute(request, async () => {}).catch((e) => e)
    expect(error).toBeInstanceOf(IdempotencyError)
    expect(error).toMatchObject({ code: 'IN_PROGRESS', status: 409, retryAfter: 1 })
    finish()
    await first
  })
})
