/**
 * The client half: name each mutation with an `Idempotency-Key`, keep the key for every
 * attempt, and retry only where a retry is safe. For tRPC, `idempotencyLink` (with
 * `idempotencyHeaders` on the mutations' `httpLink`); for any GraphQL client, `idempotentFetch`.
 * Both share one retry policy (`defaultRetryOn`, backoff, `maxAttempts`). Each half also has a
 * subpath of its own (`./client/trpc`, `./client/fetch`) that loads only its own peers' types.
 */
export * from './fetch'
export * from './trpc'
