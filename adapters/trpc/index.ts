export {
  defaultTRPCStoreErrors,
  getIdempotencyError,
  type RecordedTRPCError,
  type TRPCRootLike,
  toTRPCError,
  trpcCodeForIdempotencyError,
} from './errors'
export {
  createIdempotencyMiddleware,
  type IdempotencyCallInfo,
  type IdempotencyMeta,
  type IdempotencyMiddleware,
  type IdempotencyMiddlewareOptions,
  type IdempotencyProcedureOptions,
} from './middleware'
export { createIdempotencyPlugin } from './plugin'
