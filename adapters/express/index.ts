import { type IdempotencyError, isIdempotencyError } from '../../src'
import {
  type HttpHandlerContext,
  type HttpIdempotencyOptions,
  problemResponse,
  resolveHttpOptions,
  respondIdempotently,
} from '../http'
import {
  captureResponse,
  type NodeRequest,
  type NodeResponse,
  sendFetchResponse,
  toFetchRequest,
} from './node'

export { defaultHttpStoreStatus, type HttpHandlerContext } from '../http'
export type { NodeRequest, NodeResponse } from './node'

/** The options of the Express / Connect middleware. */
export interface ExpressIdempotencyOptions<TTransaction = unknown>
  extends HttpIdempotencyOptions<TTransaction> {
  /**
   * What the library's own refusals (400, 409, 422, 503) do: `'respond'` answers them as
   * `application/problem+json`; `'next'` passes the `IdempotencyError` to `next(error)`, for
   * your error handler (it has `status`, `code` and, for 409, `retryAfter`).
   * @default 'respond'
   */
  errors?: 'respond' | 'next' | undefined
}

/** Carries a refusal out of the engine's path to `next(error)`. */
class Refusal {
  constructor(readonly error: IdempotencyError) {}
}

/**
 * An Express (or Connect, or plain `node:http`) middleware that makes effectful routes
 * retry-safe: `app.use(express.json(), idempotency({ idempotency }))`. POST and PATCH requests
 * with a key run once per (scope, method and path, key); every retry gets the recorded response
 * with `Idempotent-Replay: true`. Routes read the lease (`deriveKey`, and `tx` in transactional
 * mode) from `res.locals.idempotency`. Put a body parser first; without one the middleware reads
 * the body itself and leaves it in `req.body` as a Buffer.
 */
export function idempotency<TTransaction = unknown>(
  options: ExpressIdempotencyOptions<TTransaction>,
): (req: NodeRequest, res: NodeResponse, next: (error?: unknown) => void) => void {
  const resolved = resolveHttpOptions(options, 'idempotency (express)', 'express')
  const refuse =
    options.errors === 'next'
      ? (error: IdempotencyError): Response => {
          throw new Refusal(error)
        }
      : problemResponse
  const { idempotency: engine } = resolved
  /** Whether a request goes through the engine: an effectful method, with a key or a rule. */
  const engages = (req: NodeRequest): boolean => {
    if (!resolved.methods.has((req.method ?? 'GET').toUpperCase())) return false
    if (resolved.getKey || (resolved.required ?? engine.required) || engine.transactional) {
      return true
    }
    return req.headers[resolved.keyHeader.toLowerCase()] !== undefined
  }
  return (req, res, next) => {
    // Safe methods, and effectful ones without a key when none is required, are not touched.
    if (!engages(req)) return next()
    let capture: ReturnType<typeof captureResponse> | undefined
    let handedOn = false
    const serve = async () => {
      const answer = await respondIdempotently(
        await toFetchRequest(req),
        resolved,
        (context: HttpHandlerContext<TTransaction>) => {
          res.locals ??= {}
          res.locals.idempotency = context
          capture = captureResponse(res)
          handedOn = true
          next()
          return capture.response
        },
        refuse,
      )
      await sendFetchResponse(res, answer, capture?.writer)
    }
    serve()
      .catch((error: unknown) => {
        capture?.restore()
        capture = undefined
        // Before the stack ran, the error is the host's to handle; after it, `next` was called
        // once already: answer here (or drop a connection whose answer has begun).
        if (!handedOn) return next(error instanceof Refusal ? error.error : error)
        const refusal =
          error instanceof Refusal ? error.error : isIdempotencyError(error) ? error : undefined
        if (refusal && !res.headersSent) return sendFetchResponse(res, problemResponse(refusal))
        res.destroy(error instanceof Error ? error : undefined)
      })
      .finally(() => capture?.restore())
  }
}
