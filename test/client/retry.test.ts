import { describe, expect, it, vi } from 'vitest'
import {
  defaultRetryOn,
  parseRetryAfter,
  type RetryFailure,
  type RetryOptions,
  resolveRetryPolicy,
  retryDelay,
  runWithRetries,
} from '../../adapters/client/retry'
import { recordingSleep, silentLogger } from './support'

const failure = (overrides: Partial<RetryFailure>): RetryFailure => ({
  attempt: 1,
  key: 'k',
  kind: 'response',
  status: undefined,
  code: undefined,
  retryAfter: undefined,
  error: undefined,
  ...overrides,
})

describe('the shared retry policy', () => {
  it.each([
    ['a network failure', { kind: 'network' as const }, true],
    ['500', { status: 500 }, true],
    ['502', { status: 502 }, true],
    ['503 STORE_UNAVAILABLE', { status: 503, code: 'STORE_UNAVAILABLE' as const }, true],
    ['409 IN_PROGRESS', { status: 409, code: 'IN_PROGRESS' as const }, true],
    ['200 with IN_PROGRESS in the body', { status: 200, code: 'IN_PROGRESS' as const }, true],
    ['503 OUTCOME_UNKNOWN', { status: 503, code: 'OUTCOME_UNKNOWN' as const }, true],
    [
      '200 with OUTCOME_UNKNOWN in the body',
      { status: 200, code: 'OUTCOME_UNKNOWN' as const },
      true,
    ],
    ['400 KEY_INVALID', { status: 400, code: 'KEY_INVALID' as const }, false],
    ['400 KEY_REQUIRED', { status: 400, code: 'KEY_REQUIRED' as const }, false],
    ['422 KEY_REUSED', { status: 422, code: 'KEY_REUSED' as const }, false],
    ['422 RESPONSE_NOT_STORED', { status: 422, code: 'RESPONSE_NOT_STORED' as const }, false],
    ['401', { status: 401 }, false],
    ['404', { status: 404 }, false],
    ['429', { status: 429 }, false],
  ])('defaultRetryOn answers %s with %s', (_name, overrides, expected) => {
    expect(defaultRetryOn(failure(overrides))).toBe(expected)
  })

  it('doubles the delay per attempt up to maxDelay when jitter is off', () => {
    const policy = resolveRetryPolicy({
      backoff: { initialDelay: 100, maxDelay: 1000, jitter: false },
    })
    const delays = [1, 2, 3, 4, 5, 6].map((attempt) => retryDelay(policy, failure({ attempt })))
    expect(delays).toEqual([100, 200, 400, 800, 1000, 1000])
  })

  it('keeps each jittered delay between half and all of the exponential delay', () => {
    const policy = resolveRetryPolicy({ backoff: { initialDelay: 100, maxDelay: '10s' } })
    for (let i = 0; i < 200; i++) {
      const delay = retryDelay(policy, failure({ attempt: 3 }))
      expect(delay).toBeGreaterThanOrEqual(200)
      expect(delay).toBeLessThanOrEqual(400)
    }
  })

  it("waits exactly the server's Retry-After, shortened to maxDelay", () => {
    const policy = resolveRetryPolicy({ backoff: { maxDelay: '5s' } })
    expect(retryDelay(policy, failure({ attempt: 4, retryAfter: 1000 }))).toBe(1000)
    expect(retryDelay(policy, failure({ retryAfter: 60_000 }))).toBe(5000)
  })

  it('reads Retry-After as seconds or as an HTTP date, and ignores anything else', () => {
    expect(parseRetryAfter('2')).toBe(2000)
    expect(parseRetryAfter(' 0 ')).toBe(0)
    const inAnHour = parseRetryAfter(new Date(Date.now() + 3_600_000).toUTCString())!
    expect(inAnHour).toBeGreaterThan(3_500_000)
    expect(parseRetryAfter(new Date(0).toUTCString())).toBe(0)
    expect(parseRetryAfter('soon')).toBeUndefined()
    expect(parseRetryAfter(null)).toBeUndefined()
  })

  it.each<[RetryOptions, RegExp]>([
    [{ maxAttempts: 0 }, /maxAttempts must be a whole number of at least 1/],
    [{ maxAttempts: 2.5 }, /maxAttempts/],
    [{ backoff: { initialDelay: -1 } }, /backoff.initialDelay must be/],
    [{ backoff: { maxDelay: 'soon' as '1s' } }, /backoff.maxDelay must be/],
    [{ backoff: { initialDelay: '2s', maxDelay: '1s' } }, /maxDelay .* is shorter than/],
    [{ retryOn: true as unknown as () => boolean }, /retryOn must be a function/],
  ])('rejects the bad option %j with a TypeError that names it', (options, message) => {
    expect(() => resolveRetryPolicy(options)).toThrow(TypeError)
    expect(() => resolveRetryPolicy(options)).toThrow(message)
  })

  it('stops after maxAttempts and gives the last attempt its own answer', async () => {
    const { sleep, delays } = recordingSleep()
    const policy = resolveRetryPolicy({ maxAttempts: 3, sleep, backoff: { jitter: false } })
    const send = vi.fn(async (attempt: number) => ({
      ok: false as const,
      failure: {
        kind: 'network' as const,
        status: undefined,
        code: undefined,
        retryAfter: undefined,
        error: attempt,
      },
      final: () => `gave up after ${attempt}`,
    }))
    await expect(runWithRetries(policy, { key: 'k', signal: undefined }, send)).resolves.toBe(
      'gave up after 3',
    )
    expect(send).toHaveBeenCalledTimes(3)
    expect(delays).toEqual([200, 400])
  })

  it('logs an onRetry that throws and keeps retrying', async () => {
    const logger = silentLogger()
    const { sleep } = recordingSleep()
    const policy = resolveRetryPolicy({
      sleep,
      logger,
      onRetry: () => {
        throw new Error('metrics down')
      },
    })
    let calls = 0
    const value = await runWithRetries(policy, { key: 'k', signal: undefined }, async () =>
      ++calls < 2
        ? {
            ok: false,
            failure: {
              kind: 'network',
              status: undefined,
              code: undefined,
              retryAfter: undefined,
              error: null,
            },
            final: () => 'lost',
          }
        : { ok: true, value: 'done' },
    )
    expect(value).toBe('done')
    expect(logger.error).toHaveBeenCalledWith('onRetry threw', expect.any(Error))
  })
})
