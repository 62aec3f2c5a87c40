/**
 * `idempotent-mutations/envelop`: the GraphQL adapter, an Envelop plugin for GraphQL Yoga (and
 * plain Envelop). It only translates: it finds the key, asks the engine, and maps outcomes to
 * GraphQL results, `extensions.code` and response headers.
 */
export {
  type DefaultContext,
  defaultStoreGraphQLErrors,
  type IdempotencyContextFields,
  type IdempotencyPlugin,
  type KeyLookup,
  replayHeader,
  type UseIdempotencyOptions,
  useIdempotency,
  type YogaHooks,
} from './plugin'
export {
  type IdempotencyFieldOptions,
  idempotentDirectiveName,
  idempotentDirectiveTypeDefs,
} from './schema-options'
