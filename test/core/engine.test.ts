import { describe, expect, it, vi } from 'vitest'
import { createIdempotency, createMemoryStore, IdempotencyError } from '../../src'
import { createHarness, deferred } from './fixtures'

const operation = 'orders.create'

describe('engine: one execution per key', () => {
  it('runs a keyed operation once and replays its value to a retry', async () => {
    const { idempotency } = createHarness()
    const handler = vi.fn(async () => ({ orderId: 7 }))
    const request = { key: 'k1', operation, payload: { amount: 5, currency: 'EUR' } }
    const first = await idempotency.execute(request, handler)
    const retry = await idempotency.execute(request, handler)
    expect(handler).toHaveBeenCalledTimes(1)
    expect(first).toEqual({ value: { orderId: 7 }, replayed: false })
    expect(retry).toEqual({ value: { orderId: 7 }, replayed: true })
  })

  it('replays a retry whose payload has the same fields in another order', async () => {
    const { idempotency } = createHarness()
    const handler = vi.fn(() => 'created')
    await idempotency.execute(
      { key: 'k', operation, payload: { a: 1, b: { c: 2, d: 3 } } },
      handler,
    )
    const retry = await idempotency.execute(
      { key: 'k', operation, payload: { b: { d: 3, c: 2 }, a: 1 } },
      handler,
    )
    expect(retry.replayed).toBe(true)
    expect(handler).toHaveBeenCalledTimes(1)
  })

  it('rejects the key with 422 KEY_REUSED when the payload changed, and runs nothing', async () => {
    const { idempotency, store } = createHarness()
    const handler = vi.fn(() => 'created')
    await idempotency.execute({ key: 'k', operation, payload: { amount: 5 } }, handler)
    const before = await store.get(JSON.stringify(['', operation]), 'k')
    const error = await idempotency
      .execute({ key: 'k', operation, payload: { amount: 6 } }, handler)
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(IdempotencyError)
    expect(error).toMatchObject({ code: 'KEY_REUSED', status: 422, name: 'KeyReusedError' })
    expect(handler).toHaveBeenCalledTimes(1)
    expect(await store.get(JSON.stringify(['', operation]), 'k')).toEqual(before)
  })

  it('rejects a changed payload while the first execution still runs, too', async () => {
    const { idempotency } = createHarness()
    const running = deferred()
    const first = idempotency.execute({ key: 'k', operation, payload: 1 }, () => running.promise)
    await expect(
      idempotency.execute({ key: 'k', operation, payload: 2 }, () => undefined),
    ).rejects.toMatchObject({ code: 'KEY_REUSED' })
    running.resolve()
    await first
  })

  it('runs a mutation without a key every time and records nothing', async () => {
    const { idempotency, store } = createHarness()
    const claim = vi.spyOn(store, 'claim')
    const handler = vi.fn(() => 'ran')
    await idempotency.execute({ key: undefined, operation }, handler)
    await idempotency.execute({ key: null, operation }, handler)
    expect(handler).toHaveBeenCalledTimes(2)
    expect(claim).not.toHaveBeenCalled()
  })

  it('rejects a mutation without a key with 400 KEY_REQUIRED when keys are required', async () => {
    const { idempotency, store } = createHarness({ required: true })
    const claim = vi.spyOn(store, 'claim')
    const handler = vi.fn()
    await expect(idempotency.execute({ key: undefined, operation }, handler)).rejects.toMatchObject(
      { code: 'KEY_REQUIRED', status: 400 },
    )
    // A per-call `required: false` overrides the engine's option.
    await idempotency.execute({ key: undefined, operation, required: false }, handler)
    expect(handler).toHaveBeenCalledTimes(1)
    expect(claim).not.toHaveBeenCalled()
  })

  it('a per-call required: true applies on an engine that does not require keys', async () => {
    const { idempotency } = createHarness()
    await expect(
      idempotency.execute({ key: undefined, operation, required: true }, () => 1),
    ).rejects.toMatchObject({ code: 'KEY_REQUIRED' })
  })

  it('keeps the same key under another caller scope or operation apart', async () => {
    const { idempotency } = createHarness()
    const handler = vi.fn(() => 'ran')
    await idempotency.execute({ key: 'k', operation, scope: 'tenant-a' }, handler)
    await idempotency.execute({ key: 'k', operation, scope: 'tenant-b' }, handler)
    await idempotency.execute({ key: 'k', operation: 'orders.cancel', scope: 'tenant-a' }, handler)
    expect(handler).toHaveBeenCalledTimes(3)
  })

  it('keeps a scope and operation pair apart from a look-alike split of the same text', async () => {
    const { idempotency } = createHarness()
    const handler = vi.fn(() => 'ran')
    await idempotency.execute({ key: 'k', scope: 'a', operation: 'b.c' }, handler)
    await idempotency.execute({ key: 'k', scope: 'a.b', operation: 'c' }, handler)
    expect(handler).toHaveBeenCalledTimes(2)
  })

  it('runs a record past its ttl again, as if the key were new', async () => {
    const { idempotency, clock } = createHarness({ ttl: '1h' })
    const handler = vi.fn(() => 'ran')
    await idempotency.execute({ key: 'k', operation }, handler)
    clock.advance(59 * 60_000)
    expect((await idempotency.execute({ key: 'k', operation }, handler)).replayed).toBe(true)
    clock.advance(60_001)
    expect((await idempotency.execute({ key: 'k', operation }, handler)).replayed).toBe(false)
    expect(handler).toHaveBeenCalledTimes(2)
  })

  it('a per-call ttl overrides the engine ttl', async () => {
    const { idempotency, clock } = createHarness({ ttl: '24h' })
    const handler = vi.fn(() => 'ran')
    await idempotency.execute({ key: 'k', operation, ttl: '10s' }, handler)
    clock.advance(10_001)
    await idempotency.execute({ key: 'k', operation, ttl: '10s' }, handler)
    expect(handler).toHaveBeenCalledTimes(2)
  })
})

describe('engine: duplicates in flight', () => {
  it('answers a concurrent duplicate with 409 IN_PROGRESS and Retry-After, and runs once', async () => {
    const { idempotency } = createHarness()
    const running = deferred<string>()
    const handler = vi.fn(() => running.promise)
    const first = idempotency.execute({ key: 'k', operation }, handler)
    const error = await idempotency.execute({ key: 'k', operation }, handler).catch((e) => e)
    expect(error).toMatchObject({ code: 'IN_PROGRESS', status: 409, retryAfter: 1 })
    expect(error.message).toMatch(/retry after 1 s/)
    running.resolve('done')
    expect(await first).toEqual({ value: 'done', replayed: false })
    expect(handler).toHaveBeenCalledTimes(1)
  })

  it('gives the retryAfter option, capped by the time left on the lease', async () => {
    const { idempotency, clock } = createHarness({ retryAfter: '5s', lockTimeout: '60s' })
    const running = deferred()
    const first = idempotency.execute({ key: 'k', operation }, () => running.promise)
    await expect(idempotency.execute({ key: 'k', operation }, () => 1)).rejects.toMatchObject({
      retryAfter: 5,
    })
    clock.advance(57_500)
    await expect(idempotency.execute({ key: 'k', operation }, () => 1)).rejects.toMatchObject({
      retryAfter: 3,
    })
    running.resolve()
    await first
  })

  it('takes over an expired lease: the handler runs again, told it is a takeover', async () => {
    const { idempotency, clock, takeEvents } = createHarness({ lockTimeout: '30s' })
    const stuck = deferred()
    const contexts: boolean[] = []
    void idempotency.execute({ key: 'k', operation }, (context) => {
      contexts.push(context.takeover)
      return stuck.promise
    })
    await vi.waitFor(() => expect(contexts).toHaveLength(1))
    clock.advance(30_001)
    const second = await idempotency.execute({ key: 'k', operation }, (context) => {
      contexts.push(context.takeover)
      return 'second'
    })
    expect(second).toEqual({ value: 'second', replayed: false })
    expect(contexts).toEqual([false, true])
    expect(takeEvents()).toEqual(['takeover', 'executed'])
  })

  it('the executor that lost its lease cannot overwrite the new outcome, and its caller still gets its value', async () => {
    const { idempotency, clock, takeEvents, logger } = createHarness({ lockTimeout: '30s' })
    const slow = deferred<string>()
    // The memory store claims synchronously inside execute(): the lease is held from here.
    const first = idempotency.execute({ key: 'k', operation }, () => slow.promise)
    clock.advance(30_001)
    await idempotency.execute({ key: 'k', operation }, () => 'second')
    takeEvents()
    slow.resolve('first')
    expect(await first).toEqual({ value: 'first', replayed: false })
    expect(takeEvents()).toEqual(['lost-lease', 'executed'])
    expect(logger.warn).toHaveBeenCalledWith(expect.stringMatching(/lost the lease/))
    expect(await idempotency.execute({ key: 'k', operation }, () => 'third')).toEqual({
      value: 'second',
      replayed: true,
    })
  })

  it('a takeover with another payload is a reused key, not a takeover', async () => {
    const { idempotency, clock } = createHarness({ lockTimeout: '30s' })
    const stuck = deferred()
    void idempotency.execute({ key: 'k', operation, payload: 1 }, () => stuck.promise)
    clock.advance(30_001)
    await expect(
      idempotency.execute({ key: 'k', operation, payload: 2 }, () => 'other'),
    ).rejects.toMatchObject({ code: 'KEY_REUSED' })
  })

  it('a per-call lockTimeout overrides the engine lockTimeout', async () => {
    const { idempotency, clock } = createHarness({ lockTimeout: '60s' })
    const stuck = deferred()
    void idempotency.execute({ key: 'k', operation, lockTimeout: '5s' }, () => stuck.promise)
    clock.advance(5_001)
    const second = await idempotency.execute({ key: 'k', operation }, () => 'second')
    expect(second.value).toBe('second')
  })
})

describe('engine: lease tokens', () => {
  it('claims every key under a token of its own: 128 random bits, in base64url', async () => {
    const { idempotency, memory } = createHarness()
    const tokens = new Set<string>()
    // More claims than the tokens drawn from the random source at a time.
    for (let i = 0; i < 600; i++) {
      const attempt = await idempotency.begin({ key: `k${i}`, operation })
      if (attempt.kind !== 'execute') throw new Error('expected to claim')
      const record = await memory.get(JSON.stringify(['', operation]), `k${i}`)
      expect(record?.leaseToken).toMatch(/^[A-Za-z0-9_-]{22}$/)
      tokens.add(record!.leaseToken)
      await attempt.lease.release()
    }
    expect(tokens.size).toBe(600)
    // Random throughout, not a fixed prefix and a counter: no two of 600 tokens share their
    // first 8 characters (48 bits; a chance of about 1 in 10^9 for random ones) nor their last 8.
    const heads = new Set([...tokens].map((token) => token.slice(0, 8)))
    const tails = new Set([...tokens].map((token) => token.slice(-8)))
    expect({ heads: heads.size, tails: tails.size }).toEqual({ heads: 600, tails: 600 })
  })
})

describe('engine: derived keys', () => {
  it('derives the same downstream key for the executor and the one that takes over', async () => {
    const { idempotency, clock } = createHarness({ lockTimeout: '30s' })
    const derived: string[] = []
    const stuck = deferred()
    void idempotency.execute({ key: 'k', operation, scope: 'tenant' }, (context) => {
      derived.push(context.deriveKey('stripe'))
      return stuck.promise
    })
    clock.advance(30_001)
    await idempotency.execute({ key: 'k', operation, scope: 'tenant' }, (context) => {
      derived.push(context.deriveKey('stripe'))
    })
    expect(derived).toHaveLength(2)
    expect(derived[0]).toBe(derived[1])
  })

  it('derives different keys per name, caller scope, operation and key', async () => {
    const { idempotency } = createHarness()
    const derive = async (
      request: { key: string; scope: string; operation: string },
      name: string,
    ) => {
      let derived = ''
      await idempotency.execute(request, (context) => {
        derived = context.deriveKey(name)
      })
      return derived
    }
    const keys = [
      await derive({ key: 'k1', scope: 'a', operation }, 'stripe'),
      await derive({ key: 'k2', scope: 'a', operation }, 'stripe'),
      await derive({ key: 'k3', scope: 'a', operation }, 'stripe'),
      await derive({ key: 'k1', scope: 'b', operation }, 'stripe'),
      await derive({ key: 'k1', scope: 'a', operation: 'orders.cancel' }, 'stripe'),
    ]
    let other = ''
    await idempotency.execute({ key: 'k9', scope: 'a', operation }, (context) => {
      other = context.deriveKey('stripe')
      expect(context.deriveKey('mailer')).not.toBe(other)
      expect(context.deriveKey('stripe')).toBe(other)
    })
    expect(new Set([...keys, other]).size).toBe(6)
  })

  it('refuses to derive a key for an operation that ran without a key', async () => {
    const { idempotency } = createHarness()
    await expect(
      idempotency.execute({ key: undefined, operation }, (context) => context.deriveKey('stripe')),
    ).rejects.toThrow(/needs a keyed operation/)
  })
})

describe('engine: events', () => {
  it('reports each thing that happens to a keyed operation through onEvent', async () => {
    const { idempotency, takeEvents, events } = createHarness()
    const running = deferred()
    const first = idempotency.execute({ key: 'k', operation, scope: 'u1', payload: 1 }, () =>
      running.promise.then(() => 'ok'),
    )
    await idempotency
      .execute({ key: 'k', operation, scope: 'u1', payload: 1 }, () => 1)
      .catch(() => {})
    await idempotency
      .execute({ key: 'k', operation, scope: 'u1', payload: 2 }, () => 1)
      .catch(() => {})
    running.resolve()
    await first
    await idempotency.execute({ key: 'k', operation, scope: 'u1', payload: 1 }, () => 1)
    await idempotency
      .execute({ key: 'k2', operation, scope: 'u1' }, () => {
        throw new Error('boom')
      })
      .catch(() => {})
    expect(events[0]).toMatchObject({ type: 'conflict', operation, scope: 'u1', key: 'k' })
    expect(events.find((event) => event.type === 'executed')?.durationMs).toBeTypeOf('number')
    expect(takeEvents()).toEqual(['conflict', 'mismatch', 'executed', 'replayed', 'released'])
  })

  it('a throwing onEvent is logged and does not break the request', async () => {
    const logger = { warn: vi.fn(), error: vi.fn() }
    const idempotency = createIdempotency({
      store: createMemoryStore(),
      logger,
      onEvent: () => {
        throw new Error('listener bug')
      },
    })
    const result = await idempotency.execute({ key: 'k', operation }, () => 'value')
    expect(result).toEqual({ value: 'value', replayed: false })
    expect((await idempotency.execute({ key: 'k', operation }, () => 'other')).replayed).toBe(true)
    expect(logger.error).toHaveBeenCalledWith('onEvent threw', expect.any(Error))
  })
})

describe('engine: setup', () => {
  it('refuses to start without a store', () => {
    expect(() => createIdempotency({} as never)).toThrow(/needs a `store`/)
  })
})
