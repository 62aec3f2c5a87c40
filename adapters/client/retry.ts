import { type Duration, toMilliseconds } from '../../src/duration'
import type { Logger } from '../../src/engine/types'
import { type IdempotencyErrorCode, idempotencyErrorStatus } from '../../src/errors'
import { validateKey } from '../../src/key'

/**
 * The retry policy both client halves share (the tRPC link and the GraphQL fetch wrapper): one
 * key per logical operation, the same key on every attempt, retries only where a retry cannot
 * run the operation twice or is the only way to learn its outcome.
 *
 * This module imports no tRPC, GraphQL or DOM-only API: it runs in browsers, Node and workers.
 */

/** Why an attempt failed, as the retry policy sees it. */
export interface RetryFailure {
  /** The attempt that failed, counting from 1. */
  attempt: number
  /** The operation's `Idempotency-Key`, the same on every attempt. */
  key: string
  /**
   * `'network'`: no usable answer (the connection failed, or the response was lost or cut off
   * while it was read), so the operation may or may not have run. `'response'`: the server
   * answered with an error status or an idempotency error code.
   */
  kind: 'network' | 'response'
  /** The HTTP status, when the server answered. */
  status: number | undefined
  /** The idempotency error code the server named (`IN_PROGRESS`, `KEY_REUSED`, ...), if any. */
  code: IdempotencyErrorCode | undefined
  /** The server's `Retry-After`, in milliseconds, if it sent one. */
  retryAfter: number | undefined
  /** What the transport gave: the thrown error (network, `TRPCClientError`) or the `Response`. */
  error: unknown
}

/** What `onRetry` is told before the client waits and sends the operation again. */
export interface RetryEvent extends RetryFailure {
  /** How long the client waits before the next attempt, in milliseconds. */
  delay: number
}

export interface BackoffOptions {
  /** The delay after the first failed attempt; each later delay doubles it. @default 200 */
  initialDelay?: Duration | undefined
  /**
   * The longest wait between two attempts. A server's `Retry-After` above it is shortened to it.
   * @default '10s'
   */
  maxDelay?: Duration | undefined
  /**
   * Spread each backoff delay at random between half and all of its value, so clients that
   * failed together do not retry together. A server's `Retry-After` is never jittered.
   * @default true
   */
  jitter?: boolean | undefined
}

/** The options both `idempotencyLink` and `idempotentFetch` take. */
export interface RetryOptions {
  /** The most times one operation is sent, the first attempt included; 1 turns retries off. @default 5 */
  maxAttempts?: number | undefined
  /** The delays between attempts: exponential, capped, jittered. @default { initialDelay: 200, maxDelay: '10s', jitter: true } */
  backoff?: BackoffOptions | undefined
  /**
   * Decides whether a failed attempt is sent again (never called past `maxAttempts` or after an
   * abort). Compose with the default to widen it: `(f) => f.status === 429 || defaultRetryOn(f)`.
   * @default defaultRetryOn
   */
  retryOn?: ((failure: RetryFailure) => boolean) | undefined
  /**
   * Names a new logical operation. Called once per operation, never per attempt; the result must
   * be a valid key (1-255 visible ASCII characters) or the operation fails with `KEY_INVALID`.
   * @default () => crypto.randomUUID()
   */
  generateKey?: (() => string) | undefined
  /** Called before each retry, for logging or metrics; an error it throws is logged, not raised. @default undefined */
  onRetry?: ((event: RetryEvent) => void) | undefined
  /**
   * Stops every operation sent through this link or fetch, in flight or waiting to retry (for
   * example on shutdown). Each call's own signal (`op.signal`, `init.signal`) works as well.
   * @default undefined
   */
  signal?: AbortSignal | undefined
  /**
   * Waits between attempts; must reject when `signal` aborts. Replace it to move time in tests.
   * @default an abortable setTimeout
   */
  sleep?: ((ms: number, signal: AbortSignal | undefined) => Promise<void>) | undefined
  /** Where warnings go (a misconfigured link, an `onRetry` that threw). @default console, prefixed '[idempotent-mutations]' */
  logger?: Logger | undefined
}

/**
 * The default retry decision. Retried: network failures (the outcome is unknown, and the key
 * makes a second send safe), 5xx including 503 `STORE_UNAVAILABLE` (nothing was recorded, or the
 * key was released) and 503 `OUTCOME_UNKNOWN` (it may have been applied: the retry learns its
 * outcome), 409 and `IN_PROGRESS` (another attempt with this key is running: the retry gets its
 * replay), and those codes in a GraphQL body. Never retried: every other 4xx,
 * such as 400 `KEY_INVALID`/`KEY_REQUIRED` and 422 `KEY_REUSED`/`RESPONSE_NOT_STORED`: the same
 * request would get the same answer.
 */
/** The idempotency codes a retry with the same key can get past. */
export const retriedCodes: ReadonlySet<IdempotencyErrorCode> = new Set([
  'IN_PROGRESS',
  'STORE_UNAVAILABLE',
  'OUTCOME_UNKNOWN',
])

export function defaultRetryOn(failure: RetryFailure): boolean {
  if (failure.kind === 'network') return true
  if (failure.code !== undefined && retriedCodes.has(failure.code)) return true
  if (failure.status === undefined) return false
  return failure.status === 409 || failure.status >= 500
}

const logPrefix = '[idempotent-mutations]'

/** Writes the client's warnings to the console under the package's prefix. */
export const defaultClientLogger: Logger = {
  warn: (message, ...details) => console.warn(`${logPrefix} ${message}`, ...details),
  error: (message, ...details) => console.error(`${logPrefix} ${message}`, ...details),
}

/** Generates a fresh key with the platform's UUID generator (browsers, Node 20, workers). */
export function defaultGenerateKey(): string {
  return globalThis.crypto.randomUUID()
}

/** Waits `ms`, or rejects with the abort reason as soon as `signal` aborts. */
export function abortableSleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(abortReason(signal))
      return
    }
    const onAbort = () => {
      clearTimeout(timer)
      reject(abortReason(signal!))
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}

/** The policy with every default filled in and every option checked once, up front. */
export interface RetryPolicy {
  maxAttempts: number
  initialDelay: number
  maxDelay: number
  jitter: boolean
  retryOn: (failure: RetryFailure) => boolean
  generateKey: () => string
  onRetry: ((event: RetryEvent) => void) | undefined
  signal: AbortSignal | undefined
  sleep: (ms: number, signal: AbortSignal | undefined) => Promise<void>
  logger: Logger
}

export function resolveRetryPolicy(options: RetryOptions = {}): RetryPolicy {
  const maxAttempts = options.maxAttempts ?? 5
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1) {
    throw new TypeError(
      `idempotent-mutations: maxAttempts must be a whole number of at least 1 (got ${String(maxAttempts)})`,
    )
  }
  const backoff = options.backoff ?? {}
  const initialDelay = toMilliseconds(backoff.initialDelay ?? 200, 'backoff.initialDelay')
  const maxDelay = toMilliseconds(backoff.maxDelay ?? '10s', 'backoff.maxDelay')
  if (maxDelay < initialDelay) {
    throw new TypeError(
      `idempotent-mutations: backoff.maxDelay (${maxDelay} ms) is shorter than backoff.initialDelay (${initialDelay} ms)`,
    )
  }
  for (const name of ['retryOn', 'generateKey', 'onRetry', 'sleep'] as const) {
    if (options[name] !== undefined && typeof options[name] !== 'function') {
      throw new TypeError(`idempotent-mutations: ${name} must be a function`)
    }
  }
  return {
    maxAttempts,
    initialDelay,
    maxDelay,
    jitter: backoff.jitter ?? true,
    retryOn: options.retryOn ?? defaultRetryOn,
    generateKey: options.generateKey ?? defaultGenerateKey,
    onRetry: options.onRetry,
    signal: options.signal,
    sleep: options.sleep ?? abortableSleep,
    logger: options.logger ?? defaultClientLogger,
  }
}

/** A fresh key for a new logical operation, checked before anything is sent. */
export function newKey(policy: RetryPolicy): string {
  return validateKey(policy.generateKey())
}

/**
 * How long to wait after `failure`. A server's `Retry-After` is the server's own estimate of
 * when the answer will be ready, so it wins over the backoff (up to `maxDelay`, so a client
 * never hangs on a misconfigured server); otherwise the delay doubles per attempt.
 */
export function retryDelay(policy: RetryPolicy, failure: RetryFailure): number {
  if (failure.retryAfter !== undefined) return Math.min(failure.retryAfter, policy.maxDelay)
  const exponential = Math.min(policy.maxDelay, policy.initialDelay * 2 ** (failure.attempt - 1))
  return policy.jitter ? exponential / 2 + (Math.random() * exponential) / 2 : exponential
}

/**
 * Reads a `Retry-After` value: delay-seconds (`"2"`) or an HTTP date. Returns milliseconds, or
 * `undefined` when absent or unreadable.
 */
export function parseRetryAfter(value: string | null | undefined): number | undefined {
  if (value === null || value === undefined) return undefined
  const text = value.trim()
  if (/^\d+$/.test(text)) return Number(text) * 1000
  const at = Date.parse(text)
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now())
}

/** What one attempt ended with. */
export type AttemptOutcome<T> =
  | { ok: true; value: T }
  | {
      ok: false
      failure: Omit<RetryFailure, 'attempt' | 'key'>
      /** What the caller gets when this attempt is the last: returns the value or throws. */
      final: () => T
      /** False when the key did not go out with this attempt, so a retry could run it twice. */
      keySent?: boolean | undefined
    }

/**
 * Sends one operation until it succeeds, the policy declines, `maxAttempts` is reached or the
 * signal aborts. `send` is called with the attempt number and must use the same key every time.
 */
export async function runWithRetries<T>(
  policy: RetryPolicy,
  operation: { key: string; signal: AbortSignal | undefined; onKeyNotSent?: () => void },
  send: (attempt: number) => Promise<AttemptOutcome<T>>,
): Promise<T> {
  const { key, signal } = operation
  for (let attempt = 1; ; attempt++) {
    if (signal?.aborted) throw abortReason(signal)
    const outcome = await send(attempt)
    if (outcome.ok) return outcome.value
    // An abort is the caller's decision, not a failure to recover from.
    if (signal?.aborted) return outcome.final()
    if (outcome.keySent === false) {
      operation.onKeyNotSent?.()
      return outcome.final()
    }
    const failure: RetryFailure = { ...outcome.failure, attempt, key }
    if (attempt >= policy.maxAttempts || !policy.retryOn(failure)) return outcome.final()
    const delay = retryDelay(policy, failure)
    if (policy.onRetry) {
      try {
        policy.onRetry({ ...failure, delay })
      } catch (error) {
        policy.logger.error('onRetry threw', error)
      }
    }
    await policy.sleep(delay, signal)
  }
}

/** Combines several optional signals into one, with a cleanup that removes its listeners. */
export function anySignal(signals: readonly (AbortSignal | null | undefined)[]): {
  signal: AbortSignal | undefined
  cleanup: () => void
} {
  const present = signals.filter((s): s is AbortSignal => s !== null && s !== undefined)
  if (present.length === 0) return { signal: undefined, cleanup: () => {} }
  if (present.length === 1) return { signal: present[0], cleanup: () => {} }
  const controller = new AbortController()
  // Listeners are removed on cleanup: a long-lived `options.signal` would otherwise collect one
  // listener per operation ever sent.
  const cleanup = () => {
    for (const s of present) s.removeEventListener('abort', onAbort)
  }
  const onAbort = (event: Event) => {
    cleanup()
    controller.abort((event.target as AbortSignal).reason)
  }
  for (const s of present) {
    if (s.aborted) {
      controller.abort(s.reason)
      cleanup()
      break
    }
    s.addEventListener('abort', onAbort, { once: true })
  }
  return { signal: controller.signal, cleanup }
}

/** The reason an aborted signal carries, or a standard `AbortError`. */
export function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('This operation was aborted', 'AbortError')
}

/** Maps a server's `IDEMPOTENCY_*` GraphQL code or bare engine code to the engine's code. */
export function idempotencyCodeOf(value: unknown): IdempotencyErrorCode | undefined {
  if (typeof value !== 'string') return undefined
  const code = value.startsWith('IDEMPOTENCY_') ? value.slice('IDEMPOTENCY_'.length) : value
  return Object.hasOwn(idempotencyErrorStatus, code) ? (code as IdempotencyErrorCode) : undefined
}
