import fc from 'fast-check'
import { describe, expect, it, vi } from 'vitest'
import {
  createIdempotency,
  createMemoryStore,
  type Idempotency,
  type IdempotencyOptions,
} from '../../src'
import { remoteStore as remote } from '../support/remote-store'

/**
 * The engine's replay cache: copies of completed records that answer retries without a store
 * round trip. Its one promise is that a retry gets exactly what the store would have answered.
 */

/**
 * An engine with `replayCache` over a store that counts its claims, on a clock the test moves.
 * `engine()` makes more engines (more processes) on the same store and clock; the store's clock
 * runs `storeAheadMs` ahead of theirs.
 */
function setup(
  replayCache?: IdempotencyOptions['replayCache'],
  { storeAheadMs = 0, ...options }: Partial<IdempotencyOptions> & { storeAheadMs?: number } = {},
) {
  let clock = Date.UTC(2030, 0, 1)
  const now = () => clock
  const store = remote(createMemoryStore({ now: () => clock + storeAheadMs }))
  const engine = (extra: Partial<IdempotencyOptions> = {}) =>
    createIdempotency({ store, now, ttl: '1h', replayCache, ...options, ...extra })
  return {
    store,
    idempotency: engine(),
    engine,
    advance: (ms: number) => {
      clock += ms
    },
  }
}

const order = (key: string, amount = 5) => ({
  key,
  operation: 'orders.create',
  payload: { amount },
})

describe('the replay cache', () => {
  it('answers retries of a record completed in this process without asking the store', async () => {
    const { store, idempotency } = setup()
    let runs = 0
    const handler = () => ({ id: ++runs, at: new Date(0) })
    await idempotency.execute(order('k'), handler)
    for (let i = 0; i < 3; i++) {
      const replay = await idempotency.execute(order('k'), handler)
      expect(replay).toEqual({ value: { id: 1, at: new Date(0) }, replayed: true })
    }
    expect(runs).toBe(1)
    expect(store.claim).toHaveBeenCalledTimes(1)
  })

  it('hands every retry its own decoded copy of the value', async () => {
    const { idempotency } = setup()
    await idempotency.execute(order('k'), () => ({ items: ['a'] }))
    const first = await idempotency.execute(order('k'), () => ({ items: [] }))
    ;(first.value as { items: string[] }).items.push('changed by a caller')
    const second = await idempotency.execute(order('k'), () => ({ items: [] }))
    expect(second.value).toEqual({ items: ['a'] })
  })

  it('refuses another payload under a copied key with KEY_REUSED, without asking the store', async () => {
    const { store, idempotency } = setup()
    await idempotency.execute(order('k', 5), () => 'charged')
    await expect(idempotency.execute(order('k', 6), () => 'again')).rejects.toMatchObject({
      code: 'KEY_REUSED',
    })
    expect(store.claim).toHaveBeenCalledTimes(1)
  })

  it('copies a record it read from the store, and replays recorded errors from the copy', async () => {
    const { store, idempotency, engine } = setup()
    const other = engine()
    const failure = Object.assign(new Error('card declined'), { status: 402, code: 'DECLINED' })
    await expect(
      other.execute(order('k'), () => {
        throw failure
      }),
    ).rejects.toBe(failure)
    for (let i = 0; i < 3; i++) {
      await expect(idempotency.execute(order('k'), () => 'ran')).rejects.toMatchObject({
        name: 'Error',
        message: 'card declined',
        code: 'DECLINED',
        status: 402,
      })
    }
    // One claim by the executor, one read of the record by this engine.
    expect(store.claim).toHaveBeenCalledTimes(2)
  })

  it('keys copies by scope and operation as well as key', async () => {
    const { store, idempotency } = setup()
    await idempotency.execute({ ...order('k'), scope: 'tenant-a' }, () => 'a')
    const b = await idempotency.execute({ ...order('k'), scope: 'tenant-b' }, () => 'b')
    const refund = await idempotency.execute({ ...order('k'), operation: 'refund' }, () => 'r')
    expect([b, refund]).toEqual([
      { value: 'b', replayed: false },
      { value: 'r', replayed: false },
    ])
    expect(store.claim).toHaveBeenCalledTimes(3)
  })

  it('asks the store again once maxAge has passed', async () => {
    const { store, idempotency, advance } = setup({ maxAge: '10s' })
    await idempotency.execute(order('k'), () => 1)
    advance(9_999)
    await idempotency.execute(order('k'), () => 2)
    expect(store.claim).toHaveBeenCalledTimes(1)
    advance(1)
    expect(await idempotency.execute(order('k'), () => 2)).toEqual({ value: 1, replayed: true })
    expect(store.claim).toHaveBeenCalledTimes(2)
  })

  it('never outlives the record: past the ttl the operation runs again', async () => {
    const { idempotency, advance } = setup({ maxAge: '1h' }, { ttl: '2s' })
    await idempotency.execute(order('k'), () => 'first')
    advance(1_999)
    expect(await idempotency.execute(order('k'), () => 'second')).toEqual({
      value: 'first',
      replayed: true,
    })
    advance(1)
    expect(await idempotency.execute(order('k'), () => 'second')).toEqual({
      value: 'second',
      replayed: false,
    })
  })

  it('measures a copy’s life on the store’s clock, so a store clock ahead of ours cannot stretch it', async () => {
    // The store's clock runs an hour ahead of the engine's.
    const { engine, advance } = setup(undefined, { ttl: '2s', storeAheadMs: 3_600_000 })
    const writer = engine()
    const reader = engine()
    await writer.execute(order('k'), () => 'first')
    advance(1_000)
    expect(await reader.execute(order('k'), () => 'x')).toMatchObject({ replayed: true })
    advance(1_000)
    // Two seconds after completion the record has expired on the store's clock; neither the
    // writer's copy nor the reader's (made with one second left) may answer.
    expect(await reader.execute(order('k'), () => 'second')).toEqual({
      value: 'second',
      replayed: false,
    })
    expect(await writer.execute(order('k'), () => 'third')).toEqual({
      value: 'second',
      replayed: true,
    })
  })

  it('keeps at most maxEntries copies, dropping the least recently used', async () => {
    const { store, idempotency } = setup({ maxEntries: 2 })
    await idempotency.execute(order('a'), () => 'a')
    await idempotency.execute(order('b'), () => 'b')
    // A retry of `a` makes `b` the least recently used copy, so `c` pushes `b` out.
    await idempotency.execute(order('a'), () => 'x')
    await idempotency.execute(order('c'), () => 'c')
    store.claim.mockClear()
    for (const key of ['a', 'c']) await idempotency.execute(order(key), () => 'x')
    expect(store.claim).not.toHaveBeenCalled()
    expect(await idempotency.execute(order('b'), () => 'x')).toEqual({
      value: 'b',
      replayed: true,
    })
    expect(store.claim).toHaveBeenCalledTimes(1)
  })

  it('keeps at most maxCharacters of responses, and copies no response larger than that', async () => {
    const { store, idempotency } = setup({ maxCharacters: 100 })
    await idempotency.execute(order('large'), () => 'x'.repeat(200))
    await idempotency.execute(order('small'), () => 'y')
    store.claim.mockClear()
    await idempotency.execute(order('small'), () => 'z')
    expect(store.claim).not.toHaveBeenCalled()
    expect(await idempotency.execute(order('large'), () => 'z')).toEqual({
      value: 'x'.repeat(200),
      replayed: true,
    })
    expect(store.claim).toHaveBeenCalledTimes(1)
  })

  it('drops the oldest copies when the copies together pass maxCharacters', async () => {
    // Each outcome is stored as `{"json":{"ok":true,"value":"<20 letters>"}}`: 51 characters.
    const { store, idempotency } = setup({ maxCharacters: 110 })
    for (const letter of ['a', 'b', 'c']) {
      await idempotency.execute(order(letter), () => letter.repeat(20))
    }
    store.claim.mockClear()
    // Two fit; the third pushed out the first.
    await idempotency.execute(order('b'), () => 'z')
    await idempotency.execute(order('c'), () => 'z')
    expect(store.claim).not.toHaveBeenCalled()
    expect(await idempotency.execute(order('a'), () => 'z')).toEqual({
      value: 'a'.repeat(20),
      replayed: true,
    })
    expect(store.claim).toHaveBeenCalledTimes(1)
  })

  it('does not copy an outcome whose lease was lost: the retry gets the record that stands', async () => {
    const { engine, advance } = setup(undefined, { lockTimeout: '1s' })
    const slow = engine({ logger: { warn: () => {}, error: () => {} } })
    const other = engine()
    const result = await slow.execute(order('k'), async () => {
      advance(1_001)
      // The lease lapsed while this handler ran: another caller takes the key over and finishes.
      await other.execute(order('k'), () => 'taken over')
      return 'slow'
    })
    expect(result).toEqual({ value: 'slow', replayed: false })
    expect(await slow.execute(order('k'), () => 'x')).toEqual({
      value: 'taken over',
      replayed: true,
    })
  })

  it('checks its options even in front of the memory store, which it then does not use', () => {
    expect(() =>
      createIdempotency({ store: createMemoryStore(), replayCache: { maxAge: 'soon' as never } }),
    ).toThrow(TypeError)
  })

  it('is off with replayCache: false: every retry reads the store', async () => {
    const { store, idempotency } = setup(false)
    await idempotency.execute(order('k'), () => 1)
    await idempotency.execute(order('k'), () => 1)
    await idempotency.execute(order('k'), () => 1)
    expect(store.claim).toHaveBeenCalledTimes(3)
  })

  it('is not used in front of a store whose records live in this process (the memory store)', async () => {
    const memory = createMemoryStore()
    expect(memory.inProcess).toBe(true)
    const claim = vi.spyOn(memory, 'claim')
    const idempotency = createIdempotency({ store: memory })
    await idempotency.execute(order('k'), () => 1)
    await idempotency.execute(order('k'), () => 1)
    expect(claim).toHaveBeenCalledTimes(2)
  })

  it.each([
    [{ maxEntries: 0 }, /replayCache\.maxEntries must be a positive integer/],
    [{ maxEntries: 1.5 }, /replayCache\.maxEntries must be a positive integer/],
    [{ maxCharacters: -1 }, /replayCache\.maxCharacters must be a positive integer/],
    [{ maxAge: 'soon' }, /replayCache\.maxAge must be a non-negative number/],
  ])('refuses %j with a TypeError naming the option', (replayCache, message) => {
    expect(() =>
      createIdempotency({
        store: remote(createMemoryStore()),
        replayCache: replayCache as never,
      }),
    ).toThrow(message)
  })
})

describe('the replay cache against the store it copies (model: the same calls without it)', () => {
  type Step =
    | { kind: 'call'; engine: number; key: string; amount: number; behaviour: Behaviour }
    | { kind: 'clock'; ms: number }
  type Behaviour = 'ok' | 'recorded-error' | 'released-error'

  const step: fc.Arbitrary<Step> = fc.oneof(
    {
      weight: 4,
      arbitrary: fc.record({
        kind: fc.constant('call' as const),
        engine: fc.nat(2),
        key: fc.constantFrom('a', 'b', 'c'),
        amount: fc.constantFrom(1, 2),
        behaviour: fc.constantFrom<Behaviour>('ok', 'ok', 'recorded-error', 'released-error'),
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant('clock' as const),
        ms: fc.constantFrom(1, 300, 700, 999, 1_000, 1_001, 2_500),
      }),
    },
  )

  it('answers every call as three engines without copies over the same records would', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(step, { maxLength: 40 }),
        fc.integer({ min: -3_600_000, max: 3_600_000 }),
        fc.constantFrom(1, 2, 100),
        async (steps, skew, maxEntries) => {
          let clock = Date.UTC(2030, 0, 1)
          const now = () => clock
          // Three processes sharing one store whose clock is off from theirs by `skew`...
          const shared = remote(createMemoryStore({ now: () => clock + skew }))
          // ...and the model: three processes without copies over a store of their own.
          const plain = createMemoryStore({ now })
          const options = { now, ttl: '2s', lockTimeout: '1s' } as const
          const cached: Idempotency[] = [0, 1, 2].map(() =>
            createIdempotency({
              ...options,
              store: shared,
              replayCache: { maxEntries, maxAge: '1500ms' },
            }),
          )
          const model: Idempotency[] = [0, 1, 2].map(() =>
            createIdempotency({ ...options, store: plain }),
          )
          let serial = 0
          const run = async (engine: Idempotency, s: Extract<Step, { kind: 'call' }>) => {
            const n = ++serial
            const handler = () => {
              if (s.behaviour === 'recorded-error') {
                throw Object.assign(new Error(`declined ${n}`), { status: 402 })
              }
              if (s.behaviour === 'released-error') throw new Error(`crashed ${n}`)
              return { n }
            }
            try {
              return await engine.execute(
                { key: s.key, operation: 'op', payload: { amount: s.amount } },
                handler,
              )
            } catch (error) {
              const e = error as { code?: string; message?: string }
              return { error: e.code ?? e.message }
            }
          }
          for (const s of steps) {
            if (s.kind === 'clock') {
              clock += s.ms
              continue
            }
            // Both sides number their handler runs alike only while they run the same calls.
            const before = serial
            const got = await run(cached[s.engine]!, s)
            const ranCached = serial - before
            serial = before
            const expected = await run(model[s.engine]!, s)
            expect(got).toEqual(expected)
            expect(ranCached).toBe(serial - before)
          }
        },
      ),
      { numRuns: 300 },
    )
  })
})
