import { describe, expect, it, vi } from 'vitest'
import { createHarness, deferred, watchClaims } from './fixtures'

const operation = 'orders.create'

/** An engine whose duplicates wait, with a signal for "a duplicate saw the key taken". */
function waitingHarness(options: Parameters<typeof createHarness>[0] = {}) {
  let watched!: ReturnType<typeof watchClaims>
  const harness = createHarness({
    concurrency: 'wait',
    ...options,
    store: (memory) => {
      watched = watchClaims(memory)
      return watched.store
    },
  })
  return { ...harness, nextRefusal: () => watched.nextRefusal() }
}

describe("engine: concurrency 'wait'", () => {
  it('a waiting duplicate replays the outcome once the first execution completes', async () => {
    const { idempotency, nextRefusal } = waitingHarness()
    const running = deferred<string>()
    const handler = vi.fn(() => running.promise)
    const first = idempotency.execute({ key: 'k', operation }, handler)
    const refused = nextRefusal()
    const duplicate = idempotency.execute({ key: 'k', operation }, handler)
    await refused
    running.resolve('outcome')
    expect(await first).toEqual({ value: 'outcome', replayed: false })
    expect(await duplicate).toEqual({ value: 'outcome', replayed: true })
    expect(handler).toHaveBeenCalledTimes(1)
  })

  it('a waiting duplicate claims the key and runs itself when the first execution releases it', async () => {
    const { idempotency, nextRefusal, takeEvents } = waitingHarness()
    const failing = deferred<string>()
    const first = idempotency.execute({ key: 'k', operation }, () => failing.promise)
    const refused = nextRefusal()
    const duplicate = idempotency.execute({ key: 'k', operation }, (context) =>
      context.takeover ? 'took over' : 'ran after the release',
    )
    await refused
    failing.reject(new Error('database timeout'))
    await expect(first).rejects.toThrow('database timeout')
    expect(await duplicate).toEqual({ value: 'ran after the release', replayed: false })
    expect(takeEvents()).toEqual(['released', 'executed'])
  })

  it('a waiting duplicate takes over when the lease of the first execution expires', async () => {
    const { idempotency, nextRefusal, clock, takeEvents } = waitingHarness({
      lockTimeout: '30s',
      waitTimeout: '60s',
    })
    const stuck = deferred()
    void idempotency.execute({ key: 'k', operation }, () => stuck.promise)
    const refused = nextRefusal()
    const duplicate = idempotency.execute({ key: 'k', operation }, (context) => context.takeover)
    await refused
    clock.advance(30_001)
    expect(await duplicate).toEqual({ value: true, replayed: false })
    expect(takeEvents()).toEqual(['takeover', 'executed'])
  })

  it('gives up with 409 IN_PROGRESS once waitTimeout has passed', async () => {
    const { idempotency, nextRefusal, clock, takeEvents } = waitingHarness({ waitTimeout: '5s' })
    const stuck = deferred()
    const handler = vi.fn(() => stuck.promise)
    void idempotency.execute({ key: 'k', operation }, handler)
    const refused = nextRefusal()
    const duplicate = idempotency.execute({ key: 'k', operation }, handler)
    await refused
    clock.advance(5_001)
    await expect(duplicate).rejects.toMatchObject({
      code: 'IN_PROGRESS',
      status: 409,
      retryAfter: 1,
    })
    expect(takeEvents()).toEqual(['conflict'])
    expect(handler).toHaveBeenCalledTimes(1)
  })

  it('per call: a duplicate may wait on an engine that rejects, with its own waitTimeout', async () => {
    // The engine would give up after 1 s; the call asks for 60 s.
    const { idempotency, clock, nextRefusal } = waitingHarness({
      concurrency: 'reject',
      waitTimeout: '1s',
    })
    const running = deferred<string>()
    const first = idempotency.execute({ key: 'k', operation }, () => running.promise)
    const waiting = idempotency.execute(
      { key: 'k', operation, concurrency: 'wait', waitTimeout: '60s' },
      () => 'never',
    )
    await nextRefusal()
    // 5 s pass while the first still runs: past the engine's wait, well within the call's.
    clock.advance(5_000)
    await nextRefusal()
    running.resolve('outcome')
    await first
    expect(await waiting).toEqual({ value: 'outcome', replayed: true })
  })

  it('a waiting duplicate with another payload is rejected at once as a reused key', async () => {
    const { idempotency } = waitingHarness()
    const stuck = deferred()
    void idempotency.execute({ key: 'k', operation, payload: 1 }, () => stuck.promise)
    await expect(
      idempotency.execute({ key: 'k', operation, payload: 2 }, () => 'other'),
    ).rejects.toMatchObject({ code: 'KEY_REUSED' })
  })
})
