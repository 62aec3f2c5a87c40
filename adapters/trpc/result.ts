import type { MiddlewareResult } from '@trpc/server/unstable-core-do-not-import'

/**
 * tRPC brands every middleware result with this marker (`middlewareMarker` in
 * `@trpc/server/unstable-core-do-not-import`, a plain string at run time). The type requires it
 * so a middleware cannot forget to pass `next()`'s result through; tRPC does not read it back.
 * It is spelled out here rather than imported from the "do not import" module, and
 * `test/trpc/middleware-result.test.ts` fails if tRPC ever changes it.
 */
const middlewareMarker = 'middlewareMarker' as MiddlewareResult<object>['marker']

/**
 * The one place that builds a successful middleware result without calling `next()`: a replay
 * returns the recorded value as if the resolver had returned it. `data` is the raw value, before
 * the transformer, exactly like the result of `next()`.
 */
export function replayedResult(data: unknown): MiddlewareResult<object> {
  return { marker: middlewareMarker, ok: true, data }
}
