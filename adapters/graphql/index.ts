/**
 * What a GraphQL adapter shares whatever its host (the Envelop plugin, the Apollo Server
 * plugin), on top of the kit. A host only wires its hooks:
 *
 *     const settings = resolveGraphQLOptions(options, 'myPlugin', 'my-host')
 *     on each schema            prepareSchema(settings, schema)
 *     before executing          claim = await claimMutation(settings, { schema, document,
 *                                 operation, operationName, variables, context, headers,
 *                                 extensions })
 *       'run'                   add claim.fields (if any) to the context; execute as usual
 *       'answer'                answer claim.result without executing (a refusal carries its
 *                                 status in extensions.http); if claim.replayed, with
 *                                 Idempotent-Replay: true (claim.recorded: the result as the
 *                                 client got it, and its status, for a host that formats)
 *       'execute'               add execution.fields to the context; execute
 *     on the executor's result  execution.judge(result): its errors before any masking
 *     on the result the client  replacement = await execution.finish(result, status?): records
 *     gets                        it, or releases the key; answer the replacement if there is one
 *                                 (status: the HTTP status, where the result does not carry it)
 *     at the request's end      execution.finish(undefined): releases a key nothing settled
 *
 * Apollo Server (../apollo): `responseForOperation` claims (and answers a replay or a refusal);
 * `willSendResponse` judges the request's own `errors` (before `formatError`), then finishes
 * with the response the client gets (after it).
 */
export { type Claim, claimMutation, type MutationCall } from './claim'
export { isAsyncIterable, MutationExecution, prepareSchema } from './execution'
export {
  type DefaultContext,
  type GraphQLIdempotencyOptions,
  type GraphQLSettings,
  type IdempotencyContextFields,
  type KeyLookup,
  resolveGraphQLOptions,
} from './options'
export {
  defaultStoreGraphQLErrors,
  errorResult,
  isOriginalGraphQLError,
  type RecordedResult,
  toGraphQLError,
} from './result'
export {
  type IdempotencyFieldOptions,
  idempotentDirectiveName,
  idempotentDirectiveTypeDefs,
} from './schema-options'
