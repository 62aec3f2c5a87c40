import type {
  ApolloServerPlugin,
  BaseContext,
  GraphQLRequestContextResponseForOperation,
  GraphQLRequestContextWillSendResponse,
  GraphQLRequestListener,
  GraphQLResponse,
} from '@apollo/server'
import type { OperationDefinitionNode } from 'graphql'
import {
  claimMutation,
  type DefaultContext,
  type GraphQLIdempotencyOptions,
  type MutationExecution,
  prepareSchema,
  resolveGraphQLOptions,
} from '../graphql'
import { formatResult, refusalResponse, replayResponse } from './response'

/**
 * The options of {@link idempotencyPlugin}: the same as the Envelop plugin's (`AdapterOptions`,
 * in `adapters/kit`, with `scope` given your Apollo `contextValue`, `getKey` a `KeyLookup` and
 * `storeErrors` each error of the result before `formatError`), plus `mode` and `logger`.
 */
export type IdempotencyPluginOptions<TContext = DefaultContext> =
  GraphQLIdempotencyOptions<TContext>

/**
 * Makes mutations retry-safe in Apollo Server 5: a mutation operation that carries an
 * Idempotency-Key runs once, its result is recorded as the client received it and replayed to
 * every retry. Queries, subscriptions and introspection are untouched. It works the same under
 * every integration (`startStandaloneServer`, `expressMiddleware`, a Fetch handler) and under
 * `server.executeOperation`: it lives in Apollo's request pipeline, not in the HTTP layer.
 *
 * Where each step happens, and why (per operation: each operation of a batched request runs
 * Apollo's pipeline on its own, with its own copy of the context):
 *
 *     schemaDidLoadOrUpdate  read the schema's options; in transactional mode, wrap the root
 *                            mutation fields in savepoints
 *     responseForOperation   claim the key (../graphql/claim.ts): run, answer (a refusal or a
 *                            replay, formatted here: Apollo sends a plugin's response as it is)
 *                            or execute under a lease, with `tx`/`idempotency` in the context
 *     willSendResponse       judge `errors` (Apollo's, before `formatError`: where an error
 *                            thrown on purpose and an unexpected one still differ), then record
 *                            the result after `formatError`, which is what the client gets
 *     unexpectedErrorProcessingRequest
 *                            the pipeline threw past `willSendResponse`: release the key
 */
export function idempotencyPlugin<TContext extends BaseContext = DefaultContext>(
  options: IdempotencyPluginOptions<TContext>,
): ApolloServerPlugin<TContext> {
  const settings = resolveGraphQLOptions(options, 'idempotencyPlugin', 'apollo')
  // Apollo hands every hook of one operation the same request context.
  const executions = new WeakMap<object, MutationExecution>()

  async function responseForOperation(
    request: GraphQLRequestContextResponseForOperation<TContext>,
  ): Promise<GraphQLResponse | null> {
    // Typed as always there, but missing when `operationName` names no operation of the
    // document: Apollo's executor then answers 400, as without this plugin.
    const operation: OperationDefinitionNode | undefined = request.operation
    const { contextValue } = request
    if (operation?.operation !== 'mutation') return null
    const claim = await claimMutation(settings, {
      schema: request.schema,
      document: request.document,
      operation,
      operationName: request.request.operationName,
      variables: request.request.variables ?? {},
      context: contextValue,
      headers: request.request.http?.headers,
      extensions: request.request.extensions,
    })
    if (claim.kind === 'answer') {
      return claim.replayed ? replayResponse(claim.recorded) : refusalResponse(claim.result)
    }
    const fields = claim.kind === 'run' ? claim.fields : claim.execution.fields
    // The context's type is the user's; the fields added are theirs to declare
    // (IdempotencyContextFields).
    if (fields) Object.assign(contextValue, fields)
    if (claim.kind === 'execute') executions.set(request, claim.execution)
    return null
  }

  async function willSendResponse(
    request: GraphQLRequestContextWillSendResponse<TContext>,
  ): Promise<void> {
    const execution = executions.get(request)
    if (!execution) return
    executions.delete(request)
    const { response } = request
    if (response.body.kind !== 'single') {
      // Incremental delivery slipped past the document check (a custom executor): it cannot be
      // recorded, so the key is released.
      settings.logger.warn(
        `mutation ${execution.operation} was answered incrementally; its result was not recorded and the key was released`,
      )
      await execution.finish(undefined)
      return
    }
    execution.judge({ errors: request.errors })
    const replacement = await execution.finish(response.body.singleResult, statusOf(request))
    if (replacement) answerInstead(response, replacement)
  }

  const listener: GraphQLRequestListener<TContext> = { responseForOperation, willSendResponse }

  return {
    async serverWillStart({ schema }) {
      prepareSchema(settings, schema)
      return {
        schemaDidLoadOrUpdate({ apiSchema }) {
          prepareSchema(settings, apiSchema)
        },
      }
    },
    async requestDidStart() {
      return listener
    },
    async unexpectedErrorProcessingRequest({ requestContext }) {
      const execution = executions.get(requestContext)
      executions.delete(requestContext)
      await execution?.finish(undefined)
    },
  }
}

/**
 * The HTTP status this operation was answered with. In a batched request the head is shared by
 * every operation, so it is this operation's own: the last `extensions.http.status` among its
 * errors, as Apollo merges them.
 */
function statusOf({
  requestIsBatched,
  response,
  errors,
}: GraphQLRequestContextWillSendResponse<BaseContext>): number | undefined {
  if (!requestIsBatched) return response.http.status
  let status: number | undefined
  for (const error of errors ?? []) {
    const own = (error.extensions?.http as { status?: unknown } | undefined)?.status
    if (typeof own === 'number') status = own
  }
  return status
}

/** Replaces the response with the engine's (a COMMIT that failed, writes rolled back). */
function answerInstead(response: GraphQLResponse, replacement: object): void {
  const { singleResult, http } = formatResult(replacement)
  response.body = { kind: 'single', singleResult }
  if (http.status !== undefined) response.http.status = http.status
  for (const [name, value] of http.headers) response.http.headers.set(name, value)
}
