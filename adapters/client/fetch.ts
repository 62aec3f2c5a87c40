/**
 * `idempotent-mutations/client/fetch`: `idempotentFetch` for any GraphQL client (urql, Apollo,
 * graphql-request, plain fetch) and the retry policy. It needs no tRPC package, not even its
 * types, so a GraphQL-only app compiles with `skipLibCheck: false`.
 */
export { type FetchFunction, type IdempotentFetchOptions, idempotentFetch } from './graphql'
export * from './policy'
