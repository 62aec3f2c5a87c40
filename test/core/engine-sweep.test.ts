import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { createIdempotency, createMemoryStore, type SweepOptions } from '../../src'
import { createHarness } from './fixtures'

const operation = 'orders.create'

/** A memory store whose sweeps are recorded: the options of each, and so its signal. */
function spiedStore(sweep?: (options: SweepOptions) => Promise<number>) {
  const store = createMemoryStore()
  const spy = vi.spyOn(store, 'sweep')
  if (sweep) spy.mockImplementation((options) => sweep(options!))
  const signals = () => spy.mock.calls.map(([options]) => options!.signal!)
  return { store, spy, signals }
}

const paced = { batchSize: 2000, pause: '150ms', signal: expect.any(AbortSignal) }

describe('engine: sweeping on demand', () => {
  it('sweeps expired records through the store', async () => {
    const { idempotency, clock } = createHarness({ ttl: '1m' })
    await idempotency.execute({ key: 'a', operation }, () => 1)
    await idempotency.execute({ key: 'b', operation }, () => 1)
    clock.advance(60_001)
    expect(await idempotency.sweep()).toBe(2)
  })
})

describe('engine: the sweepInterval timer', () => {
  beforeEach(() => {
    vi.useFakeTimers()
  })
  afterEach(() => {
    vi.useRealTimers()
  })

  it('sweeps on the interval until closed', async () => {
    const { store, spy } = spiedStore()
    const idempotency = createIdempotency({ store, sweepInterval: '1m' })
    await vi.advanceTimersByTimeAsync(120_000)
    expect(spy).toHaveBeenCalledTimes(2)
    await idempotency.close()
    await vi.advanceTimersByTimeAsync(120_000)
    expect(spy).toHaveBeenCalledTimes(2)
  })

  it('paces its sweeps by default; sweepOptions go over the default field by field', async () => {
    const { store, spy } = spiedStore()
    const cases: [SweepOptions | undefined, object][] = [
      [undefined, paced],
      [{ pause: 0 }, { ...paced, pause: 0 }],
      [
        { batchSize: 500, pause: '1s' },
        { ...paced, batchSize: 500, pause: '1s' },
      ],
      // A field given as undefined keeps the default's value.
      [{ batchSize: undefined, pause: undefined }, paced],
    ]
    for (const [sweepOptions, expected] of cases) {
      const idempotency = createIdempotency({ store, sweepInterval: '1m', sweepOptions })
      await vi.advanceTimersByTimeAsync(60_000)
      expect(spy).toHaveBeenLastCalledWith(expected)
      await idempotency.close()
    }
  })

  it('refuses bad sweepOptions when the engine is created', () => {
    const store = createMemoryStore()
    expect(() => createIdempotency({ store, sweepOptions: { pause: 'soon' as never } })).toThrow(
      /sweep's pause must be/,
    )
    expect(() => createIdempotency({ store, sweepOptions: { batchSize: 0 } })).toThrow(TypeError)
    expect(() => createIdempotency({ store, sweepOptions: { signal: {} as never } })).toThrow(
      /sweep's signal must be an AbortSignal/,
    )
  })

  it('stops a running sweep when closed, and resolves close() once it has ended', async () => {
    let finish = () => {}
    // A sweep that runs until its signal aborts, then takes one more step (its last batch).
    const { store, signals } = spiedStore(async ({ signal }) => {
      await new Promise<void>((resolve) => signal!.addEventListener('abort', () => resolve()))
      await new Promise<void>((resolve) => {
        finish = resolve
      })
      return 0
    })
    const idempotency = createIdempotency({ store, sweepInterval: '1m' })
    await vi.advanceTimersByTimeAsync(60_000)
    expect(signals().map((signal) => signal.aborted)).toEqual([false])
    let closed = false
    const closing = idempotency.close().then(() => {
      closed = true
    })
    expect(signals()[0]!.aborted).toBe(true)
    await vi.advanceTimersByTimeAsync(0)
    expect(closed).toBe(false)
    finish()
    await closing
    expect(closed).toBe(true)
    await vi.advanceTimersByTimeAsync(120_000)
    expect(signals()).toHaveLength(1)
  })

  it('ends its sweeps for good when the signal in sweepOptions aborts', async () => {
    const { store, signals } = spiedStore(async () => 0)
    const own = new AbortController()
    const idempotency = createIdempotency({
      store,
      sweepInterval: '1m',
      sweepOptions: { signal: own.signal },
    })
    await vi.advanceTimersByTimeAsync(60_000)
    expect(signals().map((signal) => signal.aborted)).toEqual([false])
    own.abort()
    expect(signals()[0]!.aborted).toBe(true)
    await vi.advanceTimersByTimeAsync(120_000)
    expect(signals()).toHaveLength(1)
    await idempotency.close()

    // Aborted before the engine is created: the timer never sweeps.
    const never = createIdempotency({
      store,
      sweepInterval: '1m',
      sweepOptions: { signal: AbortSignal.abort() },
    })
    await vi.advanceTimersByTimeAsync(120_000)
    expect(signals()).toHaveLength(1)
    await never.close()
  })

  it('starts no sweep while the previous one still runs', async () => {
    let finish = () => {}
    const { store, spy } = spiedStore(
      () =>
        new Promise<number>((resolve) => {
          finish = () => resolve(0)
        }),
    )
    const idempotency = createIdempotency({ store, sweepInterval: '1m' })
    await vi.advanceTimersByTimeAsync(180_000)
    expect(spy).toHaveBeenCalledTimes(1)
    finish()
    await vi.advanceTimersByTimeAsync(60_000)
    expect(spy).toHaveBeenCalledTimes(2)
    // close() waits for the sweep that is running.
    const closing = idempotency.close()
    finish()
    await closing
  })
})
