import type { IdempotencyError } from '../../src'
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
  const resolved = resolveHttpOptions(options, 'idempotency (express)')
  const refuse =
    options.errors === 'next'
      ? (error: IdempotencyError): Response => {
          throw new Refusal(error)
        }
      : problemResponse
  return (req, res, next) => {
    const serve = async () => {
      const request = await toFetchRequest(req)
      let capture: ReturnType<typeof captureResponse> | undefined
      const answer = await respondIdempotently(
        request,
        resolved,
        (context: HttpHandlerContext<TTransaction>) => {
          res.locals ??= {}
          res.locals.idempotency = context
          capture = captureResponse(res)
          next()
          return capture.response
        },
        refuse,
      )
      try {
        await sendFetchResponse(res, answer, capture?.writer)
      } finally {
        capture?.restore()
      }
    }
    serve().catch((error: unknown) => next(error instanceof Refusal ? error.error : error))
  }
}
