import type {
  DocumentNode,
  ExecutionResult,
  GraphQLError,
  GraphQLSchema,
  OperationDefinitionNode,
} from 'graphql'
import { isIdempotencyError, type Outcome, ResponseNotStoredError, readKeyHeader } from '../../src'
import { unkeyedContext } from '../../src/engine/lease'
import { agreeOnKey, validateKey } from '../../src/key'
import { type ContextFields, contextFields, findScope, keyFromGetKey } from '../kit'
import { MutationExecution } from './execution'
import {
  analyzeMutation,
  argumentKeys,
  fingerprintPayload,
  type MutationAnalysis,
} from './operation'
import type { GraphQLSettings } from './options'
import {
  errorResult,
  incrementalRefusal,
  isRecordedResult,
  type RecordedResult,
  replayResult,
  toGraphQLError,
} from './result'
import { combinePolicies, type FieldPolicy, fieldPolicies } from './schema-options'

/** One mutation operation, as the host hands it over before executing it. */
export interface MutationCall<TContext> {
  schema: GraphQLSchema
  document: DocumentNode
  /** The selected operation, a mutation. */
  operation: OperationDefinitionNode
  operationName: string | undefined
  variables: Readonly<Record<string, unknown>>
  /** The GraphQL context: what `scope` and `getKey` are given, where the fields go. */
  context: TContext
  /** The request's headers (Fetch `Headers`, Node's header object, Apollo's `HeaderMap`). */
  headers: unknown
  /** The request's `extensions` (per operation in a batch). */
  extensions: Readonly<Record<string, unknown>> | undefined
  /**
   * The host's name in telemetry when it is not the plugin's (Yoga, running the Envelop plugin).
   * @default the adapter the settings name
   */
  adapter?: string | undefined
}

/** What the host does with a mutation operation once it is claimed. */
export type Claim =
  /** Execute it as usual, with `fields` (if any) added to its context: nothing is recorded. */
  | { kind: 'run'; fields: ContextFields | undefined }
  /** Answer `result` without executing: a refusal (its status in `extensions.http`). */
  | { kind: 'answer'; result: ExecutionResult; replayed: false }
  /**
   * Answer the recorded result without executing, with `Idempotent-Replay: true`: `result` as
   * GraphQLErrors for a host that serializes them itself (Yoga), `recorded` as the client got it
   * for a host that answers with a result already formatted (Apollo).
   */
  | { kind: 'answer'; result: ExecutionResult; replayed: true; recorded: RecordedResult }
  /** Execute it under a lease, with `execution.fields` added; settle through `execution`. */
  | { kind: 'execute'; execution: MutationExecution }

const untouched: Claim = Object.freeze({ kind: 'run', fields: undefined })

const answer = (error: GraphQLError): Claim => ({
  kind: 'answer',
  result: errorResult(error),
  replayed: false,
})

/** An engine error as the host's answer; anything else is thrown on. */
const refusal = (error: unknown): Claim => {
  if (!isIdempotencyError(error)) throw error
  return answer(toGraphQLError(error))
}

/**
 * Claims one mutation operation through the engine. A mutation that needs no record (no key,
 * none required, not transactional; or, in `'marked'` mode, no marked field) is answered
 * synchronously, before any promise: an Envelop `onExecute` that answers with one puts the
 * whole execution on its asynchronous path (about 1.5 % of an unkeyed mutation's time over
 * HTTP in Yoga). Engine errors come back as an `answer`; anything else throws.
 */
export function claimMutation<TContext>(
  settings: GraphQLSettings<TContext>,
  call: MutationCall<TContext>,
): Claim | Promise<Claim> {
  const analysis = analyzeMutation(call.document, call.operation, call.variables)
  const policies = fieldPolicies(call.schema)
  const fieldPolicyList = analysis.fieldNames.map((name) => policies.get(name))
  if (settings.mode === 'marked' && fieldPolicyList.every((policy) => policy === undefined)) {
    return untouched
  }
  const policy = combinePolicies(fieldPolicyList)
  let key: string | undefined | Promise<string | undefined>
  try {
    key = findKey(settings, call, analysis)
  } catch (error) {
    return refusal(error)
  }
  // `required` left to the engine counts as not required only when the engine says so.
  const required = policy.required ?? settings.required ?? settings.idempotency.required ?? true
  if (key === undefined && !required && !settings.inTransaction) {
    // What the engine answers for it (a bypass), without asking it.
    return settings.exposeContext ? run(settings) : untouched
  }
  return claimThroughEngine(settings, call, analysis, policy, key)
}

const run = (settings: GraphQLSettings<never>): Claim => ({
  kind: 'run',
  fields: contextFields(unkeyedContext, settings),
})

/**
 * The operation's key: synchronous from the header, arguments and extensions, so a mutation
 * without one is let through without a promise; a `getKey` is awaited.
 */
function findKey<TContext>(
  settings: GraphQLSettings<TContext>,
  call: MutationCall<TContext>,
  analysis: MutationAnalysis,
): string | undefined | Promise<string | undefined> {
  const { getKey, keyField } = settings
  if (getKey) {
    return keyFromGetKey(getKey, {
      context: call.context,
      // A copy: the analysis is shared by every request of this document (and frozen).
      fieldNames: [...analysis.fieldNames],
      document: call.document,
      operationName: call.operationName,
      variables: call.variables,
    })
  }
  const found: string[] = []
  const header = readKeyHeader(call.headers)
  if (header !== undefined) found.push(header)
  found.push(...argumentKeys(analysis.rootFields, keyField, call.variables))
  const extensionKey = call.extensions?.[keyField]
  if (extensionKey !== undefined && extensionKey !== null) found.push(validateKey(extensionKey))
  return agreeOnKey(...found)
}

async function claimThroughEngine<TContext>(
  settings: GraphQLSettings<TContext>,
  call: MutationCall<TContext>,
  analysis: MutationAnalysis,
  policy: FieldPolicy,
  foundKey: string | undefined | Promise<string | undefined>,
): Promise<Claim> {
  const operation = analysis.fieldNames.join(',')
  let attempt: Awaited<ReturnType<GraphQLSettings<TContext>['idempotency']['begin']>>
  try {
    const key = await foundKey
    if ((key !== undefined || settings.inTransaction) && analysis.incremental) {
      return answer(incrementalRefusal(key === undefined))
    }
    attempt = await settings.idempotency.begin({
      key,
      operation,
      scope:
        key === undefined ? '' : await findScope(settings.scope, call.context, 'scope(context)'),
      // Only a keyed call is fingerprinted; the engine passes the others through.
      payload:
        key === undefined
          ? undefined
          : fingerprintPayload(call.operation, analysis, call.variables),
      required: policy.required ?? settings.required,
      ttl: policy.ttl,
      transactional: settings.inTransaction,
      adapter: call.adapter ?? settings.adapter,
    })
  } catch (error) {
    return refusal(error)
  }
  if (attempt.kind === 'bypass') return run(settings)
  if (attempt.kind === 'replay') return replay(attempt.outcome, operation, settings)
  const execution = new MutationExecution(
    attempt.lease,
    operation,
    call.context as object,
    settings,
  )
  return { kind: 'execute', execution }
}

function replay(outcome: Outcome, operation: string, settings: GraphQLSettings<never>): Claim {
  if (!outcome.ok || !isRecordedResult(outcome.value)) {
    // Only a GraphQL adapter writes records under GraphQL operation names; anything else there
    // (another adapter sharing names and keys, a damaged record) is not replayed as a GraphQL
    // result: the operation ran, and its answer cannot be replayed.
    settings.logger.error(
      `the record of mutation ${operation} was not written by the GraphQL plugin; its retries get RESPONSE_NOT_STORED`,
    )
    return refusal(new ResponseNotStoredError())
  }
  const recorded = outcome.value
  return { kind: 'answer', result: replayResult(recorded), replayed: true, recorded }
}
