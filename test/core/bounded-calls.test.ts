import { afterEach, describe, expect, it, vi } from 'vitest'
import {
  createIdempotency,
  createMemoryStore,
  type IdempotencyStore,
  OutcomeUnknownError,
  type StoreTransaction,
  StoreUnavailableError,
} from '../../src'
import { claimedRecord } from '../../src/stores/record'
import { createHarness, deferred, storeDown } from './fixtures'

const operation = 'orders.create'
const scope = JSON.stringify(['', operation])
const never = <T>() => new Promise<T>(() => {})

describe('engine: store calls that never answer', () => {
  afterEach(() => {
    vi.useRealTimers()
  })

  it('a claim that never answers gets 503 STORE_UNAVAILABLE after the default claimTimeout of 2 s, and the handler never runs', async () => {
    vi.useFakeTimers()
    const store: IdempotencyStore = { ...createMemoryStore(), claim: never }
    const idempotency = createIdempotency({ store, logger: { warn() {}, error() {} } })
    const handler = vi.fn()
    const answered = idempotency.execute({ key: 'k', operation }, handler).catch((e) => e)
    await vi.advanceTimersByTimeAsync(1999)
    let settled = false
    void answered.then(() => {
      settled = true
    })
    await Promise.resolve()
    expect(settled).toBe(false)
    await vi.advanceTimersByTimeAsync(1)
    expect(await answered).toBeInstanceOf(StoreUnavailableError)
    expect(handler).not.toHaveBeenCalled()
  })

  it('a completion that never answers holds the caller at most completeTimeout; the key answers 409 until the lease ends', async () => {
    const { idempotency, events, clock, store } = createHarness({
      completeTimeout: 30,
      lockTimeout: '5s',
      store: (memory) => ({ ...memory, complete: never }),
    })
    const started = Date.now()
    const result = await idempotency.execute({ key: 'k', operation }, () => 'value')
    expect(result).toEqual({ value: 'value', replayed: false })
    // Each attempt and the caller's wait are bounded by completeTimeout.
    expect(Date.now() - started).toBeLessThan(1000)
    expect(events.map((e) => e.type)).toEqual(['completion-deferred', 'executed'])
    await expect(idempotency.execute({ key: 'k', operation }, () => 'again')).rejects.toMatchObject(
      { code: 'IN_PROGRESS' },
    )
    expect(await store.get(scope, 'k')).toMatchObject({ status: 'in_progress' })
    clock.advance(5001)
    await idempotency.drain()
    expect(events.at(-1)).toMatchObject({ type: 'store-error', stage: 'complete' })
  })

  it('a release that never answers holds the caller at most releaseTimeout; it gets its own error and store-error is reported', async () => {
    const { idempotency, events } = createHarness({
      releaseTimeout: 30,
      store: (memory) => ({ ...memory, release: never }),
    })
    const failure = new Error('boom')
    await expect(
      idempotency.execute({ key: 'k', operation }, () => {
        throw failure
      }),
    ).rejects.toBe(failure)
    expect(events).toMatchObject([{ type: 'store-error', stage: 'release' }])
  })

  it('close() makes a completion still retried in the background give up at once', async () => {
    const { idempotency, events } = createHarness({
      completeTimeout: 10,
      store: (memory) => ({
        ...memory,
        complete: async () => {
          throw storeDown()
        },
      }),
    })
    await idempotency.execute({ key: 'k', operation }, () => 'value')
    idempotency.close()
    await idempotency.drain()
    expect(events.at(-1)).toMatchObject({ type: 'store-error', stage: 'complete' })
  })
})

describe('engine: a completion that outlives a short outage', () => {
  it('is recorded once the store is back within the lease: retries got 409 meanwhile, then the replay, and the handler ran once', async () => {
    let down = true
    const back = deferred()
    const failed = deferred()
    const { idempotency, events } = createHarness({
      completeTimeout: 20,
      store: (memory) => ({
        ...memory,
        complete: async (input) => {
          if (down) {
            failed.resolve()
            throw storeDown()
          }
          back.resolve()
          return memory.complete(input)
        },
      }),
    })
    const handler = vi.fn(() => 'value')
    expect(await idempotency.execute({ key: 'k', operation }, handler)).toEqual({
      value: 'value',
      replayed: false,
    })
    await failed.promise
    await expect(idempotency.execute({ key: 'k', operation }, handler)).rejects.toMatchObject({
      code: 'IN_PROGRESS',
    })
    down = false
    await back.promise
    await idempotency.drain()
    expect(events.map((e) => e.type)).toEqual([
      'completion-deferred',
      'executed',
      'conflict',
      'completed-late',
    ])
    expect(await idempotency.execute({ key: 'k', operation }, handler)).toEqual({
      value: 'value',
      replayed: true,
    })
    expect(handler).toHaveBeenCalledTimes(1)
  })
})

/**
 * A transactional store in memory whose COMMIT the test decides: `commit` is called once the
 * callback returned, and what it returns is what the transaction's promise does. `rollback`
 * likewise once the callback threw, `savepoint` replaces opening a savepoint, and `open` is what
 * the transaction waits for before it begins (a pool handing out a connection).
 */
function transactionalStore(
  commit: () => Promise<void>,
  overrides: {
    rollback?: () => Promise<void>
    savepoint?: StoreTransaction['savepoint']
    open?: () => Promise<void>
  } = {},
): IdempotencyStore {
  const memory = createMemoryStore()
  return {
    ...memory,
    async transaction<T>(fn: (session: StoreTransaction) => Promise<T>): Promise<T> {
      await overrides.open?.()
      const session: StoreTransaction = {
        handle: {},
        async claim(input) {
          return { claimed: true, takeover: false, record: claimedRecord(input, 0, 0) }
        },
        complete: async () => true,
        savepoint: overrides.savepoint ?? ((inner) => inner(session)),
      }
      let result: T
      try {
        result = await fn(session)
      } catch (error) {
        await overrides.rollback?.()
        throw error
      }
      await commit()
      return result
    },
  }
}

describe('engine: transactional statements that never answer', () => {
  const quiet = { warn() {}, error() {} }

  it('a savepoint that never opens answers 503 STORE_UNAVAILABLE after claimTimeout, and the handler never runs', async () => {
    const idempotency = createIdempotency({
      store: transactionalStore(async () => {}, { savepoint: never }),
      transactional: true,
      claimTimeout: 30,
      logger: quiet,
    })
    const handler = vi.fn()
    const error = await idempotency.execute({ key: 'k', operation }, handler).catch((e) => e)
    expect(error).toBeInstanceOf(StoreUnavailableError)
    expect(error.cause).toMatchObject({ name: 'StoreTimeoutError', stage: 'claim' })
    expect(handler).not.toHaveBeenCalled()
  })

  // Failing open, the keyed claim's transaction times out first, then the recordless one.
  it.for([
    ['no key', undefined, 1],
    ['a key, failing open', 'k', 2],
  ] as const)(
    'a transaction that never opens, with %s, answers 503 STORE_UNAVAILABLE after claimTimeout; each that opens late is rolled back',
    async ([, key, opens]) => {
      const opened = deferred()
      const open = vi.fn(() => opened.promise)
      const rollback = vi.fn(async () => {})
      const idempotency = createIdempotency({
        store: transactionalStore(async () => {}, { open, rollback }),
        transactional: true,
        required: false,
        onStoreError: 'fail-open',
        claimTimeout: 30,
        logger: quiet,
      })
      const handler = vi.fn()
      const error = await idempotency.execute({ key, operation }, handler).catch((e) => e)
      expect(error).toBeInstanceOf(StoreUnavailableError)
      expect(error.cause).toMatchObject({ name: 'StoreTimeoutError', stage: 'claim' })
      expect(handler).not.toHaveBeenCalled()
      expect(open).toHaveBeenCalledTimes(opens)
      opened.resolve()
      await vi.waitFor(() => expect(rollback).toHaveBeenCalledTimes(opens))
    },
  )

  it('a ROLLBACK that never answers holds the caller at most releaseTimeout; it gets the handler error', async () => {
    const rollback = deferred()
    const idempotency = createIdempotency({
      store: transactionalStore(async () => {}, { rollback: () => rollback.promise }),
      transactional: true,
      releaseTimeout: 30,
      logger: quiet,
    })
    const failure = new Error('the handler failed')
    const error = await idempotency
      .execute({ key: 'k', operation }, () => {
        throw failure
      })
      .catch((e) => e)
    expect(error).toBe(failure)
    rollback.resolve()
  })
})

describe('engine: a transactional COMMIT that is not confirmed', () => {
  const quiet = { warn() {}, error() {} }

  it('a COMMIT that never answers gets 503 OUTCOME_UNKNOWN after commitTimeout', async () => {
    const events: string[] = []
    const idempotency = createIdempotency({
      store: transactionalStore(never),
      transactional: true,
      commitTimeout: 30,
      logger: quiet,
      onEvent: (e) => void events.push(`${e.type}:${e.code ?? ''}`),
    })
    const error = await idempotency.execute({ key: 'k', operation }, () => 'v').catch((e) => e)
    expect(error).toBeInstanceOf(OutcomeUnknownError)
    expect(error).toMatchObject({ code: 'OUTCOME_UNKNOWN', status: 503, retryAfter: 1 })
    expect(error.message).toMatch(/may have been applied; retry with the same key/)
    expect(events).toEqual(['outcome-unknown:OUTCOME_UNKNOWN'])
  })

  it('a COMMIT whose answer was lost to a connection reset gets OUTCOME_UNKNOWN, not STORE_UNAVAILABLE', async () => {
    const reset = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' })
    const idempotency = createIdempotency({
      store: transactionalStore(() => Promise.reject(reset)),
      transactional: true,
      logger: quiet,
    })
    const error = await idempotency.execute({ key: 'k', operation }, () => 'v').catch((e) => e)
    expect(error).toBeInstanceOf(OutcomeUnknownError)
    expect(error.cause).toBe(reset)
  })

  it('a COMMIT the database refused (a SQLSTATE) is STORE_UNAVAILABLE: nothing was applied', async () => {
    const refused = Object.assign(new Error('duplicate key'), { code: '23505' })
    const idempotency = createIdempotency({
      store: transactionalStore(() => Promise.reject(refused)),
      transactional: true,
      logger: quiet,
    })
    const error = await idempotency.execute({ key: 'k', operation }, () => 'v').catch((e) => e)
    expect(error).toBeInstanceOf(StoreUnavailableError)
    expect(error.cause).toBe(refused)
    expect(error.message).toMatch(/not run/)
  })
})
