/**
 * `idempotent-mutations/apollo`: the GraphQL adapter for Apollo Server 5, a plugin on the same
 * GraphQL core as the Envelop plugin (../graphql): the same key sources, fingerprint, schema
 * options and errors. It only translates between Apollo's request pipeline and that core.
 */
export {
  type DefaultContext,
  defaultStoreGraphQLErrors,
  type IdempotencyContextFields,
  type IdempotencyFieldOptions,
  idempotentDirectiveName,
  idempotentDirectiveTypeDefs,
  type KeyLookup,
} from '../graphql'
export { replayHeader } from '../kit'
export { type IdempotencyPluginOptions, idempotencyPlugin } from './plugin'
