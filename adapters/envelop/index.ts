/**
 * `idempotent-mutations/envelop`: the GraphQL adapter, an Envelop plugin for GraphQL Yoga (and
 * plain Envelop). It only translates: it finds the key, asks the engine, and maps outcomes to
 * GraphQL results, `extensions.code` and response headers.
 */
export {
  type DefaultContext,
  defaultStoreGraphQLErrors,
  type IdempotencyFieldOptions,
  idempotentDirectiveName,
  idempotentDirectiveTypeDefs,
  type KeyLookup,
} from '../graphql'
export { replayHeader } from '../kit'
export {
  type IdempotencyContextFields,
  type IdempotencyPlugin,
  type UseIdempotencyOptions,
  useIdempotency,
} from './plugin'
export type { YogaHooks } from './yoga'
