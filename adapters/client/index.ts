/**
 * The client half: name each mutation with an `Idempotency-Key`, keep the key for every
 * attempt, and retry only where a retry is safe. For tRPC, `idempotencyLink` (with
 * `idempotencyHeaders` on the mutations' `httpLink`); for any GraphQL client, `idempotentFetch`.
 * Both share one retry policy (`defaultRetryOn`, backoff, `maxAttempts`).
 */
export {
  type FetchFunction,
  type IdempotentFetchOptions,
  idempotentFetch,
} from './graphql'
export {
  abortableSleep,
  type BackoffOptions,
  defaultClientLogger,
  defaultGenerateKey,
  defaultRetryOn,
  parseRetryAfter,
  type RetryEvent,
  type RetryFailure,
  type RetryOptions,
} from './retry'
export {
  type IdempotencyLinkOptions,
  idempotencyHeaders,
  idempotencyKeyContextField,
  idempotencyLink,
  withIdempotencyHeaders,
} from './trpc'
