import { createHash } from 'node:crypto'
import {
  type HandlerContext,
  type IdempotencyError,
  isIdempotencyError,
  type Lease,
  type OperationRequest,
  ResponseNotStoredError,
} from '../../src'
import { unkeyedContext } from '../../src/engine/lease'
import { parseKeyHeader } from '../../src/key'
import {
  findScope,
  handlerContext,
  keepsFailure,
  keyFromGetKey,
  refusalOf,
  runUnderOperation,
} from '../kit'
import type { ResolvedHttpOptions } from './options'
import { type RecordedResponse, readForRecord, replayResponse } from './record'

/** What a handler gets besides the request: the lease's `deriveKey`, `takeover` and `tx`. */
export type HttpHandlerContext<TTransaction = unknown> = HandlerContext<TTransaction>

type Run<TTransaction> = (context: HttpHandlerContext<TTransaction>) => Promise<Response>

/**
 * Answers `request` through the engine: the methods it deduplicates run `run` once per (scope,
 * method and path, key), and every retry gets the recorded response with
 * `Idempotent-Replay: true`; any other method goes straight to `run`, and the store is never
 * called. The library's own refusals answer as `refuse` makes them: by default
 * `application/problem+json` with the stable code.
 */
export async function respondIdempotently<TTransaction>(
  request: Request,
  options: ResolvedHttpOptions<TTransaction>,
  run: Run<TTransaction>,
  refuse: (error: IdempotencyError) => Response = problemResponse,
): Promise<Response> {
  if (!options.methods.has(request.method.toUpperCase())) {
    return run(unkeyedContext as HttpHandlerContext<TTransaction>)
  }
  let attempt: Awaited<ReturnType<typeof options.idempotency.begin>>
  try {
    attempt = await options.idempotency.begin(await operationOf(request, options))
  } catch (error) {
    if (isIdempotencyError(error)) return refuse(error)
    throw error
  }
  if (attempt.kind === 'bypass') return run(unkeyedContext as HttpHandlerContext<TTransaction>)
  if (attempt.kind === 'replay') {
    const recorded = attempt.outcome.ok ? (attempt.outcome.value as RecordedResponse) : undefined
    if (recorded === undefined || recorded.notStored === true || recorded.status === undefined) {
      return refuse(new ResponseNotStoredError())
    }
    return replayResponse(recorded)
  }
  return respondUnderLease(attempt.lease, run, options, refuse)
}

/**
 * Runs the handler under `lease` and settles the lease exactly once: a response whose status
 * `storeStatus` keeps is recorded; a throw, another status, or a body that fails part-way (or
 * a client that went away: nothing whole was answered) releases the key.
 */
async function respondUnderLease<TTransaction>(
  lease: Lease<TTransaction>,
  run: Run<TTransaction>,
  options: ResolvedHttpOptions<TTransaction>,
  refuse: (error: IdempotencyError) => Response,
): Promise<Response> {
  let response: Response
  try {
    response = await runUnderOperation(lease, () => run(handlerContext(lease)))
  } catch (error) {
    await lease.release()
    throw error
  }
  if (!keepsFailure(options.statusPolicy, response.status)) {
    await lease.release()
    return response
  }
  // The body is read (up to maxResponseBytes) before the record completes and the response
  // goes out: in transactional mode completing commits, and the client must not see a success
  // that did not commit.
  let read: Awaited<ReturnType<typeof readForRecord>>
  try {
    read = await readForRecord(response, options.maxResponseBytes)
  } catch (error) {
    await lease.release()
    throw error
  }
  const refusal = await refusalOf(lease.complete(read.recorded))
  return refusal === undefined ? read.response : refuse(refusal)
}

/** The engine's request for an effectful HTTP request: key, scope, operation and payload. */
async function operationOf<TTransaction>(
  request: Request,
  options: ResolvedHttpOptions<TTransaction>,
): Promise<OperationRequest> {
  const method = request.method.toUpperCase()
  const url = new URL(request.url)
  const route = `${method} ${url.pathname}${options.includeQuery ? url.search : ''}`
  const key = options.getKey
    ? await keyFromGetKey(options.getKey, request.clone())
    : parseKeyHeader(request.headers.get(options.keyHeader))
  const base = {
    key,
    operation: route,
    required: options.required,
    ttl: options.ttl,
    lockTimeout: options.lockTimeout,
    adapter: options.adapter,
  }
  if (key === undefined) return base
  return {
    ...base,
    scope: await findScope(options.scope, request, 'scope(request)'),
    payload: { route, body: await bodyPayload(request) },
  }
}

/**
 * What the fingerprint covers of the body: a JSON body as its parsed value (key order and
 * whitespace do not matter), any other body as a hash of its bytes.
 */
async function bodyPayload(request: Request): Promise<unknown> {
  if (request.body === null) return null
  const bytes = new Uint8Array(await request.clone().arrayBuffer())
  const type = request.headers.get('content-type') ?? ''
  if (/^application\/([\w.+-]+\+)?json\b/i.test(type) && bytes.length > 0) {
    try {
      return { json: JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes)) }
    } catch {
      // Not JSON after all: byte for byte, like any other body.
    }
  }
  return { sha256: createHash('sha256').update(bytes).digest('base64url') }
}

/** The status phrases of the statuses the engine answers (RFC 9457: `title` for `about:blank`). */
const statusTitles: Record<number, string> = {
  400: 'Bad Request',
  409: 'Conflict',
  422: 'Unprocessable Content',
  503: 'Service Unavailable',
}

/** An engine refusal as RFC 9457 problem details, with its stable code and `Retry-After`. */
export function problemResponse(error: IdempotencyError): Response {
  const headers = new Headers({ 'content-type': 'application/problem+json' })
  if (error.retryAfter !== undefined) headers.set('retry-after', String(error.retryAfter))
  const body = {
    type: 'about:blank',
    title: statusTitles[error.status] ?? 'Error',
    status: error.status,
    detail: error.message,
    code: error.code,
    ...(error.retryAfter === undefined ? {} : { retryAfter: error.retryAfter }),
  }
  return new Response(JSON.stringify(body), { status: error.status, headers })
}
