import fc from 'fast-check'
import superjson from 'superjson'
import { describe, expect, it, vi } from 'vitest'
import { createIdempotency, createMemoryStore, isIdempotencyError } from '../../src'
import { type Answer, createTRPCEcho, createYogaEcho } from '../support/echo-servers'

/**
 * The replay promise, for arbitrary outputs: a retry gets the very bytes the first caller got,
 * or 422 RESPONSE_NOT_STORED; never a 500 the first caller did not get, never a second
 * execution. Random each run; fast-check prints the seed and the failing value on a failure.
 */

class Point {
  constructor(
    public x: unknown,
    public y: unknown,
  ) {}
  describe() {
    return 'point'
  }
}

class NamedError extends Error {
  override name = 'NamedError'
}

const error = fc
  .record({
    message: fc.string(),
    named: fc.boolean(),
    fields: fc.dictionary(fc.string({ maxLength: 6 }), fc.anything({ maxDepth: 1 }), {
      maxKeys: 3,
    }),
    cause: fc.option(fc.anything({ maxDepth: 1 }), { nil: undefined }),
  })
  .map(({ message, named, fields, cause }) => {
    const options = cause === undefined ? undefined : { cause }
    const made = named ? new NamedError(message, options) : new Error(message, options)
    return Object.assign(made, fields)
  })

/** Shapes meant to break a codec: cycles, getters that throw, proxies, null prototypes. */
const hostile = fc.oneof(
  fc.anything({ maxDepth: 1 }).map((value) => {
    const cycle: Record<string, unknown> = { value }
    cycle.self = cycle
    return cycle
  }),
  fc.anything({ maxDepth: 1 }).map((value) => ({
    value,
    get broken(): never {
      throw new Error('not loaded')
    },
  })),
  fc.anything({ maxDepth: 1 }).map((value) => new Proxy({ value, at: new Date(0) }, {})),
  fc.anything({ maxDepth: 1 }).map(
    (value) =>
      new Proxy(
        { value, secret: 1 },
        {
          ownKeys: () => ['value'],
          getOwnPropertyDescriptor: (t, k) => Reflect.getOwnPropertyDescriptor(t, k),
        },
      ),
  ),
)

const leafArbitraries = [
  fc.uint8Array({ maxLength: 8 }).map((bytes) => Buffer.from(bytes)),
  fc.float64Array({ maxLength: 4 }),
  fc.int16Array({ maxLength: 4 }),
  fc.bigInt64Array({ maxLength: 2 }),
  error,
  fc
    .tuple(fc.anything({ maxDepth: 1 }), fc.anything({ maxDepth: 1 }))
    .map(([x, y]) => new Point(x, y)),
  fc.constantFrom(-0, Number.NaN, Number.POSITIVE_INFINITY, new Date(Number.NaN), Symbol('s')),
]
const leaf = fc.oneof(...leafArbitraries, hostile)

const output = fc.oneof(
  fc.anything({
    maxDepth: 3,
    withBigInt: true,
    withDate: true,
    withMap: true,
    withSet: true,
    withTypedArray: true,
    withSparseArray: true,
    withNullPrototype: true,
    withBoxedValues: true,
    values: [fc.anything(), leaf],
  }),
  fc.dictionary(fc.string({ maxLength: 6 }), leaf, { maxKeys: 3 }),
  fc.array(leaf, { maxLength: 3 }),
)

const numRuns = 150
// FC_SEED=<seed> reruns the case fast-check reported.
const seeded = process.env.FC_SEED ? { seed: Number(process.env.FC_SEED) } : {}
const quiet = { warn: () => {}, error: () => {} }

/** Asserts the promise for one output: `call(key)` twice, the handler ran once; true if stored. */
async function expectFaithful(
  call: (key: string) => Promise<Answer>,
  handler: { mock: { calls: unknown[] } },
  key: string,
  notStored: (answer: Answer) => boolean,
): Promise<boolean> {
  const runs = handler.mock.calls.length
  const first = await call(key)
  const retry = await call(key)
  expect(handler.mock.calls.length - runs).toBe(1)
  if (notStored(retry)) return false
  // A 500 the first caller got too (a BigInt with no transformer) is a replay like any other;
  // tRPC writes the header twice on that path.
  expect({ ...retry, replay: retry.replay?.split(', ')[0] }).toEqual({
    status: first.status,
    body: first.body,
    replay: 'true',
  })
  return true
}

/** What JSON and the global superjson make of a value: how two values are compared on their own. */
function independently(value: unknown) {
  const json = (() => {
    try {
      return JSON.stringify(value, (_key, item) =>
        typeof item === 'bigint' ? `bigint:${item}` : item,
      )
    } catch {
      return 'unwritable'
    }
  })()
  return { json, superjson: superjson.stringify(value) }
}

/** Most generated outputs can be recorded: a run that stored few of them tested little. */
const minimumStoredShare = 0.5

describe('replays never lie (property)', () => {
  it('the engine replays an equal encoding, or answers RESPONSE_NOT_STORED', async () => {
    const idempotency = createIdempotency({ store: createMemoryStore(), logger: quiet })
    let count = 0
    let stored = 0
    await fc.assert(
      fc.asyncProperty(output, async (value) => {
        const key = `engine-${count++}`
        const handler = vi.fn(() => value)
        await idempotency.execute({ key, operation: 'echo' }, handler)
        let replay: unknown
        try {
          replay = (await idempotency.execute({ key, operation: 'echo' }, handler)).value
        } catch (thrown) {
          expect(isIdempotencyError(thrown) && thrown.code).toBe('RESPONSE_NOT_STORED')
          return
        }
        expect(handler).toHaveBeenCalledTimes(1)
        stored++
        // Not the codec's own encoding (which reads back by construction): JSON and superjson.
        expect(independently(replay)).toEqual(independently(value))
      }),
      { numRuns, ...seeded },
    )
    expect(stored / count).toBeGreaterThanOrEqual(minimumStoredShare)
  })

  it.each([false, true])(
    'tRPC sends a retry the same bytes, or 422 RESPONSE_NOT_STORED (superjson: %s)',
    async (withSuperjson) => {
      const { state, echo, call } = createTRPCEcho({ superjson: withSuperjson })
      let count = 0
      let stored = 0
      await fc.assert(
        fc.asyncProperty(output, async (value) => {
          state.output = value
          const notStored = (answer: Answer) =>
            answer.status === 422 && answer.body.includes('could not be stored')
          if (await expectFaithful(call, echo, `trpc-${count++}`, notStored)) stored++
        }),
        { numRuns, ...seeded },
      )
      expect(stored / count).toBeGreaterThanOrEqual(minimumStoredShare)
    },
  )

  // With superjson only: without a transformer, tRPC's stream fails outside any call (an
  // uncaught error) on an item JSON cannot write, a BigInt; no record is involved in that.
  it('tRPC streams a retry the same bytes, or 422 RESPONSE_NOT_STORED (superjson: true)', async () => {
    const { state, rows, callStream, nextEvent } = createTRPCEcho({ superjson: true })
    const item = fc.oneof(
      fc.anything({ maxDepth: 2, withBigInt: true, withDate: true, withMap: true, withSet: true }),
      fc.oneof(...leafArbitraries),
    )
    let count = 0
    await fc.assert(
      fc.asyncProperty(fc.array(item, { maxLength: 4 }), async (items) => {
        state.output = items
        const key = `stream-${count++}`
        const runs = rows.mock.calls.length
        const settled = nextEvent('executed')
        const first = await callStream(key)
        await settled
        const retry = await callStream(key)
        expect(rows.mock.calls.length - runs).toBe(1)
        if (retry.body.includes('could not be stored')) return
        expect(retry).toEqual({ status: first.status, body: first.body, replay: null })
      }),
      { numRuns: 100, ...seeded },
    )
  })

  // Promises that settle out of order, with and without a transformer (no BigInts without one:
  // tRPC's stream then fails outside any call).
  it.each([false, true])(
    'tRPC streams promises settling out of order the same bytes to a retry (superjson: %s)',
    async (withSuperjson) => {
      const { state, parts, callStream, nextEvent } = createTRPCEcho({ superjson: withSuperjson })
      const value = fc.anything({
        maxDepth: 2,
        withBigInt: withSuperjson,
        withDate: true,
        withMap: withSuperjson,
        withSet: withSuperjson,
      })
      const part = fc.record({ value, delay: fc.integer({ min: 0, max: 8 }) })
      let count = 0
      let stored = 0
      await fc.assert(
        fc.asyncProperty(fc.array(part, { minLength: 1, maxLength: 4 }), async (items) => {
          state.output = items
          const key = `parts-${count++}`
          const runs = parts.mock.calls.length
          const settled = nextEvent('executed')
          const first = await callStream(key, 'parts')
          await settled
          const retry = await callStream(key, 'parts')
          expect(parts.mock.calls.length - runs).toBe(1)
          if (retry.body.includes('could not be stored')) return
          stored++
          expect(retry).toEqual({ status: first.status, body: first.body, replay: null })
        }),
        { numRuns: 60, ...seeded },
      )
      expect(stored / count).toBeGreaterThanOrEqual(minimumStoredShare)
    },
  )

  it('Yoga sends a retry the same bytes, or 422 RESPONSE_NOT_STORED', async () => {
    const { state, echo, call } = createYogaEcho()
    let count = 0
    let stored = 0
    await fc.assert(
      fc.asyncProperty(output, async (value) => {
        state.output = value
        const notStored = (answer: Answer) =>
          answer.status === 422 && answer.body.includes('IDEMPOTENCY_RESPONSE_NOT_STORED')
        if (await expectFaithful(call, echo, `yoga-${count++}`, notStored)) stored++
      }),
      { numRuns, ...seeded },
    )
    expect(stored / count).toBeGreaterThanOrEqual(minimumStoredShare)
  })
})
