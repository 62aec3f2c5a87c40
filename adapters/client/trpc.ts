/**
 * `idempotent-mutations/client/trpc`: `idempotencyLink` (with `idempotencyHeaders` on the
 * mutations' `httpLink`) and the retry policy.
 */
export {
  type IdempotencyLinkOptions,
  idempotencyHeaders,
  idempotencyKeyContextField,
  idempotencyLink,
  withIdempotencyHeaders,
} from './link'
export * from './policy'
