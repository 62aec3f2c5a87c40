import type { OnExecuteEventPayload, OnExecuteHookResult, Plugin } from '@envelop/core'
import { getOperationAST, type OperationDefinitionNode } from 'graphql'
import {
  type Claim,
  claimMutation,
  type DefaultContext,
  type GraphQLIdempotencyOptions,
  type GraphQLSettings,
  type IdempotencyContextFields,
  isAsyncIterable,
  isOriginalGraphQLError,
  type MutationCall,
  type MutationExecution,
  prepareSchema,
  resolveGraphQLOptions,
} from '../graphql'
import { runUnderOperation } from '../kit'
import { type YogaHooks, YogaRequests } from './yoga'

/**
 * The options of {@link useIdempotency}: the common ones of every adapter (`AdapterOptions`,
 * in `adapters/kit`), with `scope` given the context, `getKey` a `KeyLookup` and `storeErrors`
 * each error of the result (by default `defaultStoreGraphQLErrors`), plus `mode` and `logger`.
 */
export type UseIdempotencyOptions<TContext = DefaultContext> = GraphQLIdempotencyOptions<TContext>

export type { IdempotencyContextFields }

export type IdempotencyPlugin<TContext extends DefaultContext = DefaultContext> = Plugin<TContext> &
  YogaHooks

type Payload<TContext> = OnExecuteEventPayload<TContext>
type HookResult<TContext> = OnExecuteHookResult<TContext> | undefined

/** The mutation as the GraphQL core needs it: Yoga's `request` and `params`, or Node's `req`. */
function mutationCall<TContext extends DefaultContext>(
  { args, context }: Payload<TContext>,
  operation: OperationDefinitionNode,
  yoga: YogaRequests,
): MutationCall<TContext> {
  return {
    schema: args.schema,
    document: args.document,
    operation,
    operationName: args.operationName ?? undefined,
    variables: (args.variableValues ?? {}) as Record<string, unknown>,
    context,
    headers:
      (context.request as { headers?: unknown } | undefined)?.headers ??
      (context.req as { headers?: unknown } | undefined)?.headers,
    extensions: (context.params as { extensions?: Record<string, unknown> } | undefined)
      ?.extensions,
    adapter: yoga.runs(context) ? 'yoga' : undefined,
  }
}

/**
 * Makes mutations retry-safe in GraphQL Yoga and Envelop: a mutation operation that carries an
 * Idempotency-Key runs once, its whole `ExecutionResult` is recorded and replayed to every
 * retry. Queries, subscriptions and introspection are untouched.
 *
 * Where each step happens, and why:
 *
 *     onExecute          claim the key (../graphql/claim.ts): run, answer (a refusal or a
 *                        replay), or execute under a lease
 *     (executeFn)        judge the executor's raw errors with `storeErrors`: after this, a
 *                        masked unexpected error looks like any other GraphQLError
 *     onExecuteDone      (plain Envelop) record the result as plugins before this one left it
 *     onExecutionResult  (Yoga, ./yoga.ts) record the result as masked: Yoga's masking plugin
 *                        is registered after user plugins, so only this hook sees the client's
 *     onResponse         (Yoga) set `Idempotent-Replay`, release any lease left unsettled
 *
 * Without Yoga (plain Envelop) there is no later hook: the result is recorded in
 * `onExecuteDone`, as masked by the plugins registered before this one.
 */
export function useIdempotency<TContext extends DefaultContext = DefaultContext>(
  options: UseIdempotencyOptions<TContext>,
): IdempotencyPlugin<TContext> {
  const settings = resolveGraphQLOptions(options, 'useIdempotency', 'envelop')
  const yoga = new YogaRequests()

  function onClaim(payload: Payload<TContext>, claim: Claim): HookResult<TContext> {
    if (claim.kind === 'run') {
      // The context's type is the user's; the fields added are theirs to declare
      // (IdempotencyContextFields).
      if (claim.fields) payload.extendContext(claim.fields as unknown as Partial<TContext>)
      return undefined
    }
    if (claim.kind === 'answer') {
      if (claim.replayed) yoga.replayed(payload.context)
      payload.setResultAndStopExecution(claim.result)
      return undefined
    }
    return executeUnderLease(payload, claim.execution, yoga, settings)
  }

  return {
    onSchemaChange({ schema }) {
      prepareSchema(settings, schema)
    },

    onExecute(payload) {
      const { args } = payload
      const operation = getOperationAST(args.document, args.operationName)
      // Queries and everything else pass through synchronously: no store call, no extra tick.
      if (operation?.operation !== 'mutation') return
      const claim = claimMutation(settings, mutationCall(payload, operation, yoga))
      // A mutation that needs no record is let through synchronously (see claimMutation).
      if (!(claim instanceof Promise)) return onClaim(payload, claim)
      return claim.then((claimed) => onClaim(payload, claimed))
    },

    ...yoga.hooks,
  }
}

/**
 * The execution's lifetime in Envelop: its fields in the context, the executor's own result
 * judged, and, without Yoga, the result settled in `onExecuteDone`.
 */
function executeUnderLease<TContext extends DefaultContext>(
  { context, executeFn, extendContext, setExecuteFn }: Payload<TContext>,
  execution: MutationExecution,
  yoga: YogaRequests,
  settings: GraphQLSettings<TContext>,
): OnExecuteHookResult<TContext> {
  if (execution.fields) extendContext(execution.fields as unknown as Partial<TContext>)
  const underYoga = yoga.track(context, execution)
  setExecuteFn(async (executionArgs) => {
    let result: Awaited<ReturnType<typeof executeFn>>
    try {
      result = await runUnderOperation(execution.lease, () => executeFn(executionArgs))
    } catch (error) {
      // Envelop runs no onExecuteDone for an executor that throws. Yoga still reports the
      // request's end (onExecutionResult, onResponse); plain Envelop does not, so the key is
      // released here rather than left in progress until its lease ends.
      if (!underYoga) await execution.finish(undefined)
      throw error
    }
    if (isAsyncIterable(result)) execution.recordable = false
    else execution.judge(result)
    return result
  })
  return {
    async onExecuteDone({ result, setResult }) {
      if (isAsyncIterable(result)) {
        // Incremental delivery slipped past the document check (a plugin turned the result
        // into a stream): it cannot be recorded, so the key is released.
        settings.logger.warn(
          `mutation ${execution.operation} returned a stream; its result was not recorded and the key was released`,
        )
        execution.recordable = false
      } else if (execution.recordable === undefined) {
        // A later plugin replaced the executor, so its raw result was never seen: judge the
        // result as it stands here.
        execution.judge(result)
      }
      if (underYoga) return
      // Without Yoga, this result is what gets recorded. An error in it that still wraps an
      // unexpected exception has not been masked yet (a masker registered after this plugin)
      // and must never be replayed.
      const visible = isAsyncIterable(result) ? undefined : result
      if (visible?.errors?.some((error) => !isOriginalGraphQLError(error))) {
        execution.recordable = false
      }
      const replacement = await execution.finish(visible)
      if (replacement) setResult(replacement)
    },
  }
}
