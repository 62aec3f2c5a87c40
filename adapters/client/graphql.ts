import { defaultKeyField, idempotencyKeyHeader } from '../../src/key'
import {
  argumentKey,
  extensionKey,
  isMutation,
  isRecord,
  type OperationBody,
  readBody,
} from './graphql-body'
import {
  type AttemptOutcome,
  anySignal,
  idempotencyCodeOf,
  newKey,
  parseRetryAfter,
  type RetryFailure,
  type RetryOptions,
  type RetryPolicy,
  resolveRetryPolicy,
  retriedCodes,
  runWithRetries,
} from './retry'

/** A `fetch`: the platform's, undici's, or any function with its signature. */
export type FetchFunction = (input: RequestInfo | URL, init?: RequestInit) => Promise<Response>

/** The options of `idempotentFetch`: the shared retry options. */
export type IdempotentFetchOptions = RetryOptions

/**
 * Wraps a `fetch` so GraphQL mutations get an `Idempotency-Key` and are retried safely. Use the
 * result wherever a GraphQL client takes a `fetch`: urql's `fetch`, Apollo's `HttpLink`
 * `fetch`, graphql-request's `fetch`, or call it directly.
 *
 * Each call is one logical request: when its body holds a mutation (found by parsing the
 * document with `graphql` and selecting the operation by `operationName`), it gets one key,
 * kept on every retry: the `Idempotency-Key` header, or, in a batched (JSON array) body,
 * `extensions.idempotencyKey` on each mutation. A request that already names its key (the
 * header, `extensions.idempotencyKey`, or an `idempotencyKey` argument) keeps it. Queries,
 * subscriptions, GET requests and bodies that are not GraphQL pass through untouched.
 */
export function idempotentFetch<F extends FetchFunction>(
  fetch: F,
  options: IdempotentFetchOptions = {},
): F {
  if (typeof fetch !== 'function') {
    throw new TypeError('idempotent-mutations: idempotentFetch needs the fetch function to wrap')
  }
  const policy = resolveRetryPolicy(options)

  const wrapped = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const request = isRequest(input) ? input : undefined
    const plan = await planRequest(request, init, policy)
    if (plan === undefined) return fetch(input, init)
    const { signal, cleanup } = anySignal([init?.signal, request?.signal, policy.signal])
    const attemptInit: RequestInit = { ...init, headers: plan.headers, body: plan.body }
    if (signal !== undefined) attemptInit.signal = signal
    try {
      return await runWithRetries(policy, { key: plan.key, signal }, () =>
        sendOnce(() =>
          request === undefined
            ? fetch(input, attemptInit)
            : fetch(new Request(request, attemptInit)),
        ),
      )
    } finally {
      cleanup()
    }
  }
  return wrapped as F
}

interface Plan {
  /** The key(s) the request goes out with, for `onRetry` (a batch joins its keys with ', '). */
  key: string
  headers: HeadersInit | undefined
  body: BodyInit
}

/**
 * Decides whether this request is a mutation to protect and, if so, how it goes out: returns
 * `undefined` for everything to pass through untouched.
 */
async function planRequest(
  request: Request | undefined,
  init: RequestInit | undefined,
  policy: RetryPolicy,
): Promise<Plan | undefined> {
  const method = (init?.method ?? request?.method ?? 'GET').toUpperCase()
  if (method !== 'POST') return undefined
  const headers = init?.headers ?? request?.headers
  const body = await readBody(request, init)
  if (body === undefined) return undefined

  let parsed: unknown
  try {
    parsed = JSON.parse(body.operations)
  } catch {
    return undefined
  }
  const batched = Array.isArray(parsed)
  const operations = (batched ? parsed : [parsed]) as unknown[]
  if (!operations.every(isRecord)) return undefined
  const mutations: OperationBody[] = []
  for (const operation of operations) {
    if (await isMutation(operation)) mutations.push(operation)
  }
  if (mutations.length === 0) return undefined

  const headerKey = readHeader(headers, idempotencyKeyHeader)
  if (headerKey !== undefined) {
    // The caller named this request already: keep its key, add none.
    return { key: headerKey, headers, body: body.original }
  }
  const keys: string[] = []
  if (!batched) {
    const [mutation] = mutations as [OperationBody]
    const own = extensionKey(mutation) ?? (await argumentKey(mutation))
    if (own !== undefined) return { key: own, headers, body: body.original }
    const key = newKey(policy)
    return { key, headers: withHeader(headers, idempotencyKeyHeader, key), body: body.original }
  }
  // A batch: one HTTP header cannot name several operations, so each mutation gets its own
  // key in its `extensions`, which the server reads per operation.
  for (const mutation of mutations) {
    const own = extensionKey(mutation) ?? (await argumentKey(mutation))
    if (own !== undefined) keys.push(own)
    else {
      const key = newKey(policy)
      mutation.extensions = {
        ...(isRecord(mutation.extensions) ? mutation.extensions : {}),
        [defaultKeyField]: key,
      }
      keys.push(key)
    }
  }
  return { key: keys.join(', '), headers, body: body.rewrite(JSON.stringify(operations)) }
}

/**
 * Sends one attempt and classifies its answer. A response that is JSON or an error is read in
 * full here: a body cut off mid-read is a lost answer (retried like a network error), and a
 * GraphQL body may name an idempotency error under HTTP 200 (a batch always answers 200). The
 * caller gets a fresh `Response` over the text that was read. A successful response of another
 * type (a multipart or event stream) is handed over unread.
 */
async function sendOnce(send: () => Promise<Response>): Promise<AttemptOutcome<Response>> {
  let response: Response
  try {
    response = await send()
  } catch (error) {
    return lost(error)
  }
  const contentType = response.headers.get('content-type') ?? ''
  if (response.ok && !/json/i.test(contentType)) return { ok: true, value: response }
  let text: string
  try {
    text = await response.text()
  } catch (error) {
    return lost(error)
  }
  const copy = () => rebuild(response, text)
  const found = /json/i.test(contentType) ? idempotencyErrorIn(text) : undefined
  if (response.ok && found === undefined) return { ok: true, value: copy() }
  const failure: Omit<RetryFailure, 'attempt' | 'key'> = {
    kind: 'response',
    status: response.status,
    code: found?.code,
    retryAfter: parseRetryAfter(response.headers.get('retry-after')) ?? found?.retryAfter,
    error: copy(),
  }
  return { ok: false, failure, final: copy }
}

function lost(error: unknown): AttemptOutcome<Response> {
  const failure = {
    kind: 'network',
    status: undefined,
    code: undefined,
    retryAfter: undefined,
    error,
  } as const
  return {
    ok: false,
    failure,
    final: () => {
      throw error
    },
  }
}

/**
 * Finds the idempotency error a GraphQL body reports (`extensions.code` = `IDEMPOTENCY_*`), in
 * one result or any result of a batch; a retryable one (`IN_PROGRESS`, `STORE_UNAVAILABLE`,
 * `OUTCOME_UNKNOWN`)
 * wins over the others, since retrying the batch is then worth it for that operation.
 */
function idempotencyErrorIn(
  text: string,
): { code: NonNullable<RetryFailure['code']>; retryAfter: number | undefined } | undefined {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return undefined
  }
  const found: { code: NonNullable<RetryFailure['code']>; retryAfter: number | undefined }[] = []
  for (const result of Array.isArray(parsed) ? parsed : [parsed]) {
    const errors = isRecord(result) && Array.isArray(result.errors) ? result.errors : []
    for (const error of errors) {
      const extensions = isRecord(error) && isRecord(error.extensions) ? error.extensions : {}
      const raw = extensions.code
      const code =
        typeof raw === 'string' && raw.startsWith('IDEMPOTENCY_')
          ? idempotencyCodeOf(raw)
          : undefined
      if (code === undefined) continue
      const seconds = extensions.retryAfter
      const retryAfter = typeof seconds === 'number' && seconds >= 0 ? seconds * 1000 : undefined
      found.push({ code, retryAfter })
    }
  }
  return found.find((f) => retriedCodes.has(f.code)) ?? found[0]
}

const nullBodyStatuses = new Set([101, 103, 204, 205, 304])

/** A new `Response` with the original's status and headers over the body text already read. */
function rebuild(response: Response, text: string): Response {
  const headers = new Headers(response.headers)
  // The text is decoded: the original length and encoding no longer describe it.
  headers.delete('content-length')
  headers.delete('content-encoding')
  return new Response(nullBodyStatuses.has(response.status) ? null : text, {
    status: response.status,
    statusText: response.statusText,
    headers,
  })
}

function readHeader(headers: HeadersInit | undefined, name: string): string | undefined {
  if (headers === undefined) return undefined
  const lower = name.toLowerCase()
  if (typeof (headers as Headers).get === 'function') {
    return (headers as Headers).get(name) ?? undefined
  }
  const entries = Array.isArray(headers) ? headers : Object.entries(headers)
  const entry = entries.find(([n, v]) => n.toLowerCase() === lower && v !== undefined)
  return entry?.[1]
}

/** Adds a header, keeping the form the caller used (a `Headers`, a pair list or a record). */
function withHeader(headers: HeadersInit | undefined, name: string, value: string): HeadersInit {
  if (headers === undefined) return { [name]: value }
  if (typeof (headers as Headers).get === 'function') {
    const copy = new Headers(headers)
    copy.set(name, value)
    return copy
  }
  if (Array.isArray(headers)) return [...headers, [name, value]]
  return { ...(headers as Record<string, string>), [name]: value }
}

function isRequest(input: unknown): input is Request {
  return typeof Request !== 'undefined' && input instanceof Request
}
