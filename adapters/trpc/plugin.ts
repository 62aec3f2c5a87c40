import { initTRPC } from '@trpc/server'
import {
  createIdempotencyMiddleware,
  type IdempotencyMeta,
  type IdempotencyMiddlewareOptions,
} from './middleware'

/**
 * The middleware as a tRPC v11 plugin: a procedure built on its own `initTRPC`, to join yours
 * with `.concat()`:
 *
 *     const idempotent = createIdempotencyPlugin<Context>({ idempotency })
 *     const createProcedure = t.procedure.concat(idempotent.procedure)
 *
 * `TContext` is the part of your context the options read (for `scope`); your context must
 * extend it, and your meta type must be compatible with {@link IdempotencyMeta}.
 */
export function createIdempotencyPlugin<TContext extends object = object>(
  options: IdempotencyMiddlewareOptions<TContext>,
) {
  const t = initTRPC.context<TContext>().meta<IdempotencyMeta>().create()
  // Inside this generic function tRPC's mapped context type cannot be matched to `TContext`;
  // at run time the context is the caller's, which extends `TContext` (concat checks that).
  const middleware = createIdempotencyMiddleware(
    options as unknown as IdempotencyMiddlewareOptions<unknown>,
  )
  return { procedure: t.procedure.use(middleware) }
}
