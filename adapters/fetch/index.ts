import {
  type HttpHandlerContext,
  type HttpIdempotencyOptions,
  resolveHttpOptions,
  respondIdempotently,
} from '../http'

export type { HttpHandlerContext } from '../http'
export { defaultHttpStoreStatus, type HttpIdempotencyOptions } from '../http'

/** The options of {@link withIdempotency}. */
export type WithIdempotencyOptions<TTransaction = unknown> = HttpIdempotencyOptions<TTransaction>

const contexts = new WeakMap<Request, HttpHandlerContext<unknown>>()

/**
 * The lease context of the request a wrapped handler is answering: `deriveKey(name)`,
 * `takeover`, and `tx` in transactional mode. Undefined outside a wrapped handler.
 */
export function idempotencyContext<TTransaction = unknown>(
  request: Request,
): HttpHandlerContext<TTransaction> | undefined {
  return contexts.get(request) as HttpHandlerContext<TTransaction> | undefined
}

/**
 * Makes a Fetch-API handler retry-safe: Next.js route handlers, Bun and Deno servers, anything
 * `(request: Request, ...rest) => Response`. POST and PATCH requests with a key run once per
 * (scope, method and path, key); every retry gets the recorded response with
 * `Idempotent-Replay: true`. Other methods pass through untouched.
 *
 *     export const POST = withIdempotency(handler, { idempotency, key: 'webhook-id' })
 */
export function withIdempotency<TArgs extends unknown[], TTransaction = unknown>(
  handler: (request: Request, ...rest: TArgs) => Response | Promise<Response>,
  options: WithIdempotencyOptions<TTransaction>,
): (request: Request, ...rest: TArgs) => Promise<Response> {
  if (typeof handler !== 'function') {
    throw new TypeError('idempotent-mutations: withIdempotency needs the handler to wrap')
  }
  const resolved = resolveHttpOptions(options, 'withIdempotency', 'fetch')
  return (request, ...rest) =>
    respondIdempotently(request, resolved, async (context) => {
      contexts.set(request, context)
      try {
        return await handler(request, ...rest)
      } finally {
        contexts.delete(request)
      }
    })
}
