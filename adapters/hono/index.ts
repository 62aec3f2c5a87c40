import type { MiddlewareHandler } from 'hono'
import {
  type HttpHandlerContext,
  type HttpIdempotencyOptions,
  resolveHttpOptions,
  respondIdempotently,
} from '../http'

export { defaultHttpStoreStatus, type HttpHandlerContext } from '../http'

/** The options of the Hono middleware. */
export type HonoIdempotencyOptions<TTransaction = unknown> = HttpIdempotencyOptions<TTransaction>

/** What the middleware adds to the context: `c.get('idempotency')`. */
export interface IdempotencyVariables<TTransaction = unknown> {
  idempotency: HttpHandlerContext<TTransaction>
}

/**
 * A Hono middleware that makes effectful routes retry-safe: `app.use('/payments/*',
 * idempotency({ idempotency }))`. POST and PATCH requests with a key run once per (scope, method
 * and path, key); every retry gets the recorded response with `Idempotent-Replay: true`. Routes
 * read the lease (`deriveKey`, and `tx` in transactional mode) with `c.get('idempotency')`.
 */
export function idempotency<TTransaction = unknown>(
  options: HonoIdempotencyOptions<TTransaction>,
): MiddlewareHandler<{ Variables: IdempotencyVariables<TTransaction> }> {
  const resolved = resolveHttpOptions(options, 'idempotency (hono)', 'hono')
  return async (c, next) => {
    // Read first, so that the headers earlier middleware set (CORS, request ids, cookies) are
    // merged into whatever is answered: a replay, a refusal, or the route's response.
    void c.res
    c.res = await respondIdempotently(c.req.raw, resolved, async (context) => {
      c.set('idempotency', context)
      await next()
      return c.res
    })
  }
}
