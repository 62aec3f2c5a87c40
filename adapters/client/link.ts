import type {
  HTTPHeaders,
  Operation,
  OperationResultEnvelope,
  OperationResultObservable,
  TRPCClientError,
  TRPCLink,
} from '@trpc/client'
import type { AnyRouter } from '@trpc/server'
import type { Observer, Unsubscribable } from '@trpc/server/observable'
import { agreeOnKey, defaultKeyField, idempotencyKeyHeader, validateKey } from '../../src/key'
import {
  type AttemptOutcome,
  anySignal,
  idempotencyCodeOf,
  newKey,
  parseRetryAfter,
  type RetryFailure,
  type RetryOptions,
  resolveRetryPolicy,
  runWithRetries,
} from './retry'

// Only types come from tRPC: this file loads without @trpc/client installed, so a GraphQL-only
// user of 'idempotent-mutations/client' needs no tRPC packages (they are optional peers).

/** The `op.context` field the link puts the key in, and where a caller may supply their own. */
export const idempotencyKeyContextField = 'idempotencyKey'

export interface IdempotencyLinkOptions extends RetryOptions {
  /**
   * Also put the key in this field of the mutation's input (an object, or none), for links that
   * cannot send a per-operation header such as `httpBatchLink`. The server reads the same field
   * (its `keyField`, `'idempotencyKey'` by default); a strict input schema must allow it. With
   * `undefined`, the key only travels in the `Idempotency-Key` header that `idempotencyHeaders`
   * adds on the terminating `httpLink`.
   * @default undefined
   */
  keyField?: string | undefined
}

/**
 * The contexts whose key a terminating link turned into a header (through `idempotencyHeaders`
 * or `withIdempotencyHeaders`). The retry loop only resends a mutation whose key went out: a
 * retry without a key could run the mutation twice, which is worse than no retry.
 */
const sentContexts = new WeakSet<object>()

/**
 * A tRPC link that names each mutation with an `Idempotency-Key` and retries it safely.
 *
 * Each mutation gets one key (from `op.context.idempotencyKey` when the caller set one, else
 * `generateKey()`), kept for every attempt; the key travels in `op.context` to the terminating
 * `httpLink`, whose `headers: idempotencyHeaders` sends it. Failed attempts are retried per the
 * shared policy (network errors, 5xx, 409 after its `Retry-After`; never other 4xx), with
 * exponential backoff and jitter, until `maxAttempts` or until `op.signal`/`signal` aborts.
 * Queries and subscriptions pass through untouched and get no key.
 *
 * Place it before the terminating link, and send mutations through a non-batching `httpLink`:
 * one HTTP request carries one header (see the `splitLink` recipe in the docs).
 */
export function idempotencyLink<TRouter extends AnyRouter = AnyRouter>(
  options: IdempotencyLinkOptions = {},
): TRPCLink<TRouter> {
  const policy = resolveRetryPolicy(options)
  const { keyField } = options
  if (keyField !== undefined && (typeof keyField !== 'string' || keyField === '')) {
    throw new TypeError('idempotent-mutations: keyField must be a non-empty string')
  }
  let warned = false
  const onKeyNotSent = () => {
    if (warned) return
    warned = true
    policy.logger.warn(
      'idempotencyLink: a mutation failed and its Idempotency-Key was not sent, so it is not retried. Give the httpLink that sends mutations `headers: idempotencyHeaders` (or withIdempotencyHeaders), route mutations to it with splitLink, or set the keyField option.',
    )
  }

  return () =>
    ({ op, next }) => {
      if (op.type !== 'mutation') return next(op)
      type Envelope = OperationResultEnvelope<unknown, TRPCClientError<TRouter>>
      return createObservable<Envelope | undefined, TRPCClientError<TRouter>>((observer) => {
        // Aborted when the caller unsubscribes, so a pending wait or request stops with it.
        const unsubscribed = new AbortController()
        const { signal, cleanup } = anySignal([op.signal, policy.signal, unsubscribed.signal])
        let current: Unsubscribable | undefined

        const run = async () => {
          const { key, input, keyInInput } = keyOperation(op, keyField, () => newKey(policy))
          return runWithRetries(policy, { key, signal, onKeyNotSent }, () => {
            // A fresh context object per attempt, so "was the key sent" is known per attempt.
            const context = { ...op.context, [idempotencyKeyContextField]: key }
            const attemptOp: Operation = { ...op, input, context, signal: signal ?? op.signal }
            current?.unsubscribe()
            return new Promise<AttemptOutcome<Envelope | undefined>>((resolve) => {
              current = next(attemptOp).subscribe({
                next: (envelope) => resolve({ ok: true, value: envelope }),
                complete: () => resolve({ ok: true, value: undefined }),
                error: (error) =>
                  resolve({
                    ok: false,
                    failure: describeTrpcError(error),
                    final: () => {
                      throw error
                    },
                    keySent: keyInInput || sentContexts.has(context),
                  }),
              })
            })
          })
        }

        run()
          .then(
            (envelope) => {
              if (envelope !== undefined) observer.next(envelope)
              observer.complete()
            },
            // Key and abort errors are not TRPCClientErrors; the client wraps them in one.
            (error) => observer.error(error as TRPCClientError<TRouter>),
          )
          // An observer that throws must not become an unhandled rejection.
          .catch((error) => policy.logger.error('idempotencyLink: an observer threw', error))
          .finally(cleanup)
        return () => {
          unsubscribed.abort()
          current?.unsubscribe()
          cleanup()
        }
      }) as unknown as OperationResultObservable<TRouter, unknown>
    }
}

/**
 * The `headers` option of the `httpLink` that sends mutations: adds the `Idempotency-Key`
 * header that `idempotencyLink` put in `op.context`, and nothing for other operations.
 * `httpLink({ url, headers: idempotencyHeaders })`
 */
export function idempotencyHeaders(opts: { op: Operation }): Record<string, string> {
  const key = opts.op.context[idempotencyKeyContextField]
  if (typeof key !== 'string') return {}
  sentContexts.add(opts.op.context)
  return { [idempotencyKeyHeader]: key }
}

/**
 * Wraps your own `headers` (an object, or a function of `{ op }`) so the result also carries
 * the operation's `Idempotency-Key`. An `Idempotency-Key` in your headers is replaced by the
 * operation's: one request names one operation.
 * `httpLink({ url, headers: withIdempotencyHeaders(({ op }) => ({ authorization })) })`
 */
export function withIdempotencyHeaders(
  headers?:
    | HTTPHeaders
    | ((opts: { op: Operation }) => HTTPHeaders | Promise<HTTPHeaders>)
    | undefined,
): (opts: { op: Operation }) => Promise<Record<string, string | string[] | undefined>> {
  return async (opts) => {
    const base = typeof headers === 'function' ? await headers(opts) : (headers ?? {})
    const record: Record<string, string | string[] | undefined> =
      Symbol.iterator in base
        ? Object.fromEntries(base as Iterable<[string, string]>)
        : { ...(base as Record<string, string | string[] | undefined>) }
    const key = idempotencyHeaders(opts)[idempotencyKeyHeader]
    if (key === undefined) return record
    for (const name of Object.keys(record)) {
      if (name.toLowerCase() === idempotencyKeyHeader.toLowerCase()) delete record[name]
    }
    record[idempotencyKeyHeader] = key
    return record
  }
}

/**
 * Picks the operation's key: one the caller put in `op.context` or in the input field, else a
 * new one; and, with `keyField`, the input that carries it.
 */
function keyOperation(
  op: Operation,
  keyField: string | undefined,
  generate: () => string,
): { key: string; input: unknown; keyInInput: boolean } {
  const fromContext = op.context[idempotencyKeyContextField]
  const contextKey = fromContext === undefined ? undefined : validateKey(fromContext)
  if (keyField === undefined) {
    // A key the caller put in the input's `idempotencyKey` (where the server looks by default)
    // is this operation's key: sending another one in the header would be answered 400.
    const raw = isPlainObject(op.input) ? op.input[defaultKeyField] : undefined
    const inputKey = raw === undefined || raw === null ? undefined : validateKey(raw)
    return {
      key: agreeOnKey(contextKey, inputKey) ?? generate(),
      input: op.input,
      keyInInput: false,
    }
  }
  const { input } = op
  if (input !== undefined && !isPlainObject(input)) {
    // FormData, binary or scalar input has no field to carry a key: the header must.
    return { key: contextKey ?? generate(), input, keyInInput: false }
  }
  const raw = input?.[keyField]
  const inputKey = raw === undefined || raw === null ? undefined : validateKey(raw)
  const key = agreeOnKey(contextKey, inputKey) ?? generate()
  return { key, input: { ...input, [keyField]: key }, keyInInput: true }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object') return false
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

/**
 * Reads what the retry policy needs from a `TRPCClientError`: the HTTP status (the error shape's
 * `data.httpStatus`, else the raw response's), `Retry-After`, the SPEC code when the server's
 * formatter exposes it as `data.idempotency`, and whether the server answered
 * at all. No tRPC error shape and no error status means the answer was lost (the request
 * failed, or the body was cut off or unreadable): a network failure.
 */
function describeTrpcError(error: unknown): Omit<RetryFailure, 'attempt' | 'key'> {
  const { data, meta, shape } = (error ?? {}) as {
    data?: { httpStatus?: unknown; idempotency?: unknown } | null | undefined
    meta?: { response?: { status?: unknown; headers?: { get?: unknown } } } | null | undefined
    shape?: unknown | undefined
  }
  const response = meta?.response
  const headers = response?.headers as { get(name: string): string | null } | undefined
  const retryAfter =
    typeof headers?.get === 'function' ? parseRetryAfter(headers.get('retry-after')) : undefined
  const responseStatus =
    typeof response?.status === 'number' && response.status >= 400 ? response.status : undefined
  const status = typeof data?.httpStatus === 'number' ? data.httpStatus : responseStatus
  // tRPC shapes carry only the tRPC code (CONFLICT, ...); the SPEC code is there when the
  // server's errorFormatter adds it as `data.idempotency` (see the tRPC adapter's docs).
  const idempotency = data?.idempotency
  const code = idempotencyCodeOf(
    typeof idempotency === 'object' && idempotency !== null
      ? (idempotency as { code?: unknown }).code
      : idempotency,
  )
  const answered = status !== undefined || (shape !== undefined && shape !== null)
  return { kind: answered ? 'response' : 'network', status, code, retryAfter, error }
}

/**
 * A minimal observable with the shape tRPC's links expect (`subscribe` with a partial observer,
 * `pipe` for operators). Written here rather than imported so this module has no runtime
 * dependency on @trpc/server. It delivers nothing after an error, completion or unsubscribe,
 * and tears down once.
 */
function createObservable<TValue, TError>(
  start: (observer: Observer<TValue, TError>) => () => void,
) {
  const self = {
    subscribe(observer: Partial<Observer<TValue, TError>>): Unsubscribable {
      let done = false
      let tornDown = false
      let teardown: (() => void) | undefined
      const stop = () => {
        if (tornDown || teardown === undefined) return
        tornDown = true
        teardown()
      }
      teardown = start({
        next: (value) => {
          if (!done) observer.next?.(value)
        },
        error: (error) => {
          if (done) return
          done = true
          try {
            observer.error?.(error)
          } finally {
            stop()
          }
        },
        complete: () => {
          if (done) return
          done = true
          try {
            observer.complete?.()
          } finally {
            stop()
          }
        },
      })
      if (done) stop()
      return {
        unsubscribe: () => {
          done = true
          stop()
        },
      }
    },
    pipe(...operators: ((source: unknown) => unknown)[]): unknown {
      return operators.reduce((source, operator) => operator(source), self as unknown)
    },
  }
  return self
}
