import { describe, expect, it, vi } from 'vitest'
import { type Codec, defaultStoreErrors, ReplayedError } from '../../src'
import { createHarness, storeDown } from './fixtures'

const operation = 'orders.create'
const scope = JSON.stringify(['', operation])

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code = `HTTP_${status}`,
  ) {
    super(message)
    this.name = 'HttpError'
  }
}

describe('engine: the store is unreachable while claiming', () => {
  it('fails closed by default: 503 STORE_UNAVAILABLE, the handler does not run', async () => {
    const { idempotency, takeEvents, logger } = createHarness({
      store: (memory) => ({
        ...memory,
        claim: async () => {
          throw storeDown()
        },
      }),
    })
    const handler = vi.fn()
    const error = await idempotency.execute({ key: 'k', operation }, handler).catch((e) => e)
    expect(error).toMatchObject({ code: 'STORE_UNAVAILABLE', status: 503 })
    expect(error.cause).toMatchObject({ message: expect.stringMatching(/ECONNREFUSED/) })
    expect(handler).not.toHaveBeenCalled()
    expect(takeEvents()).toEqual(['store-error'])
    expect(logger.error).toHaveBeenCalled()
  })

  it('fails open on request: the handler runs unprotected and a store-error event is emitted', async () => {
    const { idempotency, events } = createHarness({
      onStoreError: 'fail-open',
      store: (memory) => ({
        ...memory,
        claim: async () => {
          throw storeDown()
        },
      }),
    })
    const handler = vi.fn(() => 'ran anyway')
    expect(await idempotency.execute({ key: 'k', operation }, handler)).toEqual({
      value: 'ran anyway',
      replayed: false,
    })
    expect(events).toEqual([expect.objectContaining({ type: 'store-error', stage: 'claim' })])
    expect(await idempotency.begin({ key: 'k', operation })).toEqual({
      kind: 'bypass',
      reason: 'store-unavailable',
    })
  })
})

describe('engine: recording the outcome fails', () => {
  it('retries a failed completion and records the outcome when the store comes back', async () => {
    let failures = 2
    const { idempotency, store, events } = createHarness({
      store: (memory) => ({
        ...memory,
        complete: async (input) => {
          if (failures-- > 0) throw storeDown()
          return memory.complete(input)
        },
      }),
    })
    const handler = vi.fn(() => 'value')
    await idempotency.execute({ key: 'k', operation }, handler)
    expect(await store.get(scope, 'k')).toMatchObject({ status: 'completed' })
    expect(events.map((event) => event.type)).toEqual(['executed'])
    expect((await idempotency.execute({ key: 'k', operation }, handler)).replayed).toBe(true)
    expect(handler).toHaveBeenCalledTimes(1)
  })

  it('does not report a lost lease when a failed attempt had committed after all', async () => {
    let first = true
    const { idempotency, events } = createHarness({
      store: (memory) => ({
        ...memory,
        complete: async (input) => {
          const ok = await memory.complete(input)
          if (first) {
            first = false
            throw new Error('connection reset after commit')
          }
          return ok
        },
      }),
    })
    await idempotency.execute({ key: 'k', operation }, () => 'value')
    expect(events.map((event) => event.type)).toEqual(['executed'])
  })

  it('does not report a lost lease when a completion sent twice answers false the second time', async () => {
    // What a client that re-sends a command after a reconnect produces: the first copy
    // completed the record, the answer the caller sees is the second copy's `false`.
    const { idempotency, events, logger } = createHarness({
      store: (memory) => ({
        ...memory,
        complete: async (input) => {
          await memory.complete(input)
          return memory.complete(input)
        },
      }),
    })
    await idempotency.execute({ key: 'k', operation }, () => 'value')
    expect(events.map((event) => event.type)).toEqual(['executed'])
    expect(logger.warn).not.toHaveBeenCalled()
  })

  it('keeps retrying a completion that keeps failing until the lease ends, then reports it; the caller gets its value at once', async () => {
    let attempts = 0
    const { idempotency, store, events, logger, clock } = createHarness({
      completeTimeout: 20,
      lockTimeout: '10s',
      store: (memory) => ({
        ...memory,
        complete: async () => {
          attempts++
          throw storeDown()
        },
      }),
    })
    const result = await idempotency.execute({ key: 'k', operation }, () => 'value')
    expect(result).toEqual({ value: 'value', replayed: false })
    expect(events.map((event) => event.type)).toEqual(['completion-deferred', 'executed'])
    // The key stays in progress while the completion is retried: a retry now is told to wait.
    expect(await store.get(scope, 'k')).toMatchObject({ status: 'in_progress' })
    await expect(idempotency.execute({ key: 'k', operation }, () => 'again')).rejects.toMatchObject(
      { code: 'IN_PROGRESS' },
    )
    clock.advance(10_001)
    await idempotency.drain()
    expect(attempts).toBeGreaterThan(1)
    expect(events.filter((event) => event.type === 'store-error')).toMatchObject([
      { stage: 'complete' },
    ])
    expect(logger.error).toHaveBeenCalledWith(
      expect.stringMatching(/could not record/),
      expect.any(Error),
    )
  })

  it('reports a failed release and still throws the handler error', async () => {
    const { idempotency, events } = createHarness({
      store: (memory) => ({
        ...memory,
        release: async () => {
          throw storeDown()
        },
      }),
    })
    await expect(
      idempotency.execute({ key: 'k', operation }, () => {
        throw new Error('handler failed')
      }),
    ).rejects.toThrow('handler failed')
    expect(events).toEqual([expect.objectContaining({ type: 'store-error', stage: 'release' })])
  })
})

describe('engine: which failures are recorded', () => {
  it.each([400, 403, 404, 422])(
    'records a %d error and replays it to the retry without running again',
    async (status) => {
      const { idempotency } = createHarness()
      const handler = vi.fn(() => {
        throw new HttpError(status, 'card declined')
      })
      const request = { key: 'k', operation }
      await expect(idempotency.execute(request, handler)).rejects.toBeInstanceOf(HttpError)
      const replayed = await idempotency.execute(request, handler).catch((e) => e)
      expect(replayed).toBeInstanceOf(ReplayedError)
      expect(replayed).toMatchObject({
        name: 'HttpError',
        message: 'card declined',
        code: `HTTP_${status}`,
        status,
      })
      expect(handler).toHaveBeenCalledTimes(1)
    },
  )

  it.each([
    ['a 500', new HttpError(500, 'database down')],
    ['a 408', new HttpError(408, 'timeout')],
    ['a 409', new HttpError(409, 'conflict')],
    ['a 429', new HttpError(429, 'slow down')],
    ['an unexpected exception', new TypeError('undefined is not a function')],
    ['a thrown string', 'boom'],
  ])('releases the key after %s so the retry runs again', async (_, thrown) => {
    const { idempotency, store } = createHarness()
    const handler = vi.fn(() => {
      throw thrown
    })
    await expect(idempotency.execute({ key: 'k', operation }, handler)).rejects.toBe(thrown)
    expect(await store.get(scope, 'k')).toBeUndefined()
    await expect(idempotency.execute({ key: 'k', operation }, handler)).rejects.toBe(thrown)
    expect(handler).toHaveBeenCalledTimes(2)
  })

  it('the storeErrors option replaces the policy, and a per-call one replaces that', async () => {
    const { idempotency } = createHarness({ storeErrors: () => true })
    const fails = vi.fn(() => {
      throw new Error('recorded by the engine policy')
    })
    await idempotency.execute({ key: 'a', operation }, fails).catch(() => {})
    await expect(idempotency.execute({ key: 'a', operation }, fails)).rejects.toBeInstanceOf(
      ReplayedError,
    )
    expect(fails).toHaveBeenCalledTimes(1)
    const perCall = { key: 'b', operation, storeErrors: () => false }
    await idempotency.execute(perCall, fails).catch(() => {})
    await idempotency.execute(perCall, fails).catch(() => {})
    expect(fails).toHaveBeenCalledTimes(3)
  })

  it('serializeError and deserializeError shape what a replay throws', async () => {
    const { idempotency } = createHarness()
    const request = {
      key: 'k',
      operation,
      serializeError: (error: unknown) => ({ reason: (error as Error).message }),
      deserializeError: (data: unknown) =>
        new Error(`replayed: ${(data as { reason: string }).reason}`),
    }
    const handler = () => {
      throw new HttpError(402, 'payment required')
    }
    await idempotency.execute(request, handler).catch(() => {})
    await expect(idempotency.execute(request, handler)).rejects.toThrow(
      'replayed: payment required',
    )
  })

  it('the default policy reads status or statusCode', () => {
    expect(defaultStoreErrors({ statusCode: 404 })).toBe(true)
    expect(defaultStoreErrors({ status: 499 })).toBe(true)
    expect(defaultStoreErrors({ status: 500 })).toBe(false)
    expect(defaultStoreErrors({ status: '404' })).toBe(false)
    expect(defaultStoreErrors(null)).toBe(false)
  })
})

describe('engine: responses that cannot be stored', () => {
  it('a response over maxResponseBytes reaches the first caller; a retry gets 422 RESPONSE_NOT_STORED', async () => {
    const { idempotency, store, events } = createHarness({ maxResponseBytes: 1024 })
    const big = 'x'.repeat(2048)
    const handler = vi.fn(() => big)
    expect(await idempotency.execute({ key: 'k', operation }, handler)).toEqual({
      value: big,
      replayed: false,
    })
    expect(await store.get(scope, 'k')).toMatchObject({ status: 'completed', response: null })
    expect(events.map((event) => event.type)).toEqual(['not-stored', 'executed'])
    const error = await idempotency.execute({ key: 'k', operation }, handler).catch((e) => e)
    expect(error).toMatchObject({ code: 'RESPONSE_NOT_STORED', status: 422 })
    expect(error.message).toMatch(/will not run again/)
    expect(handler).toHaveBeenCalledTimes(1)
  })

  it('a response at exactly maxResponseBytes is stored and replayed', async () => {
    const { idempotency } = createHarness({ maxResponseBytes: 100 })
    const encoded = (text: string) =>
      Buffer.byteLength(JSON.stringify({ json: { ok: true, value: text } }))
    const text = 'y'.repeat(100 - encoded(''))
    expect(encoded(text)).toBe(100)
    await idempotency.execute({ key: 'k', operation }, () => text)
    expect((await idempotency.execute({ key: 'k', operation }, () => '')).replayed).toBe(true)
  })

  it('an unserializable response (a getter that throws) is handled the same way', async () => {
    const { idempotency, events, logger } = createHarness()
    const value = {
      get broken(): never {
        throw new Error('cannot read')
      },
    }
    const handler = vi.fn(() => value)
    expect((await idempotency.execute({ key: 'k', operation }, handler)).value).toBe(value)
    expect(events.map((event) => event.type)).toEqual(['not-stored', 'executed'])
    expect(logger.warn).toHaveBeenCalledWith(
      expect.stringMatching(/not serializable/),
      expect.any(Error),
    )
    await expect(idempotency.execute({ key: 'k', operation }, handler)).rejects.toMatchObject({
      code: 'RESPONSE_NOT_STORED',
    })
    expect(handler).toHaveBeenCalledTimes(1)
  })

  it('a cyclic response under a JSON codec is handled the same way', async () => {
    const json: Codec = { encode: JSON.stringify, decode: JSON.parse }
    const { idempotency } = createHarness({ codec: json })
    const cyclic: { self?: unknown } = {}
    cyclic.self = cyclic
    const handler = vi.fn(() => cyclic)
    expect((await idempotency.execute({ key: 'k', operation }, handler)).value).toBe(cyclic)
    await expect(idempotency.execute({ key: 'k', operation }, handler)).rejects.toMatchObject({
      code: 'RESPONSE_NOT_STORED',
    })
    expect(handler).toHaveBeenCalledTimes(1)
  })
})
