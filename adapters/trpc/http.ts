import { readKeyHeader } from '../../src'

/**
 * The parts of a tRPC context this adapter looks at, as the HTTP adapters hand them to
 * `createContext`: the fetch adapter gives `req` (a `Request`) and `resHeaders` (`Headers`); the
 * Node adapters (standalone, Express, Next pages) give `req` (an `IncomingMessage`) and `res` (a
 * `ServerResponse`, with `setHeader()`); the Fastify adapter gives its `FastifyRequest` and
 * `FastifyReply`, which has `header()` instead. `createCaller` has none of them, and that is
 * fine: the header is then simply absent.
 */
interface HttpContext {
  req?: { headers?: unknown; url?: unknown } | undefined
  resHeaders?: { set(name: string, value: string): void } | undefined
  res?: {
    /** Node's `ServerResponse`. */
    setHeader?(name: string, value: string): unknown
    headersSent?: boolean | undefined
    /** Fastify's `FastifyReply`: `header()`, `sent`, and the `ServerResponse` as `raw`. */
    header?(name: string, value: string): unknown
    sent?: boolean | undefined
    raw?: { headersSent?: boolean } | undefined
  }
}

function asHttpContext(ctx: unknown): HttpContext | undefined {
  return ctx !== null && typeof ctx === 'object' ? (ctx as HttpContext) : undefined
}

/**
 * The request object of this call, shared by every call of one HTTP batch; undefined when
 * there is none, or when its URL shows it is not a batch (tRPC batches only with `batch=1` in
 * the query), so that a lone call skips the batch bookkeeping. tRPC decodes the query's names
 * and values (`batch=%31`, `%62atch=1`), so any `batch=` counts, and so does any URL with a
 * percent-escape; a URL that only looks like a batch costs the bookkeeping, nothing more.
 */
export function batchRequestOf(ctx: unknown): object | undefined {
  const req = asHttpContext(ctx)?.req
  if (req === null || typeof req !== 'object') return undefined
  const { url } = req as { url?: unknown }
  const lone = typeof url === 'string' && !url.includes('batch=') && !url.includes('%')
  return lone ? undefined : req
}

/** The `Idempotency-Key` header of the request behind `ctx`, validated, if there is one. */
export function headerKeyOf(ctx: unknown): string | undefined {
  return readKeyHeader(asHttpContext(ctx)?.req?.headers)
}

/**
 * Sets a response header when the context can carry one. Streamed responses
 * (`httpBatchStreamLink`) have sent their headers before any call finishes: then nothing is set
 * (a Node `res` would throw ERR_HTTP_HEADERS_SENT, and a fetch `Response` already copied them).
 */
export function setResponseHeader(ctx: unknown, name: string, value: string): void {
  const http = asHttpContext(ctx)
  if (typeof http?.resHeaders?.set === 'function') http.resHeaders.set(name, value)
  const res = http?.res
  if (res === undefined || res === null) return
  if (typeof res.setHeader === 'function') {
    if (!res.headersSent) res.setHeader(name, value)
  } else if (typeof res.header === 'function' && !res.sent && !res.raw?.headersSent) {
    res.header(name, value)
  }
}
