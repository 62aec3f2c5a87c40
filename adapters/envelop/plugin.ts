import type { OnExecuteEventPayload, OnExecuteHookResult, Plugin } from '@envelop/core'
import {
  type DocumentNode,
  defaultFieldResolver,
  type ExecutionArgs,
  type ExecutionResult,
  GraphQLError,
  type GraphQLField,
  type GraphQLSchema,
  getOperationAST,
  type OperationDefinitionNode,
} from 'graphql'
import {
  defaultLogger,
  type HandlerContext,
  type Idempotency,
  isIdempotencyError,
  type Lease,
  type Logger,
  ResponseNotStoredError,
  readKeyHeader,
} from '../../src'
import { unkeyedContext } from '../../src/engine/lease'
import { assertTransactionalStore } from '../../src/engine/options'
import { agreeOnKey, callerScope, defaultKeyField, validateKey } from '../../src/key'
import {
  analyzeMutation,
  argumentKeys,
  fingerprintPayload,
  type MutationAnalysis,
} from './operation'
import {
  errorResult,
  isOriginalGraphQLError,
  isRecordedResult,
  recordResult,
  replayResult,
  toGraphQLError,
} from './result'
import { combinePolicies, fieldPolicies } from './schema-options'

// The context is whatever the server builds; like Envelop's own default, it is loosely typed
// so `scope: (context) => context.user?.id` type-checks without a type argument.
// biome-ignore lint/suspicious/noExplicitAny: mirrors Envelop's `Record<string, any>` default
export type DefaultContext = Record<string, any>

/** What `getKey` is given to find the key of one mutation operation. */
export interface KeyLookup<TContext> {
  /** The GraphQL context (in Yoga: with `request` and `params`). */
  context: TContext
  /** The mutation's root field names, sorted. */
  fieldNames: readonly string[]
  document: DocumentNode
  operationName: string | undefined
  variables: Readonly<Record<string, unknown>>
}

export interface UseIdempotencyOptions<TContext = DefaultContext> {
  /** The engine from `createIdempotency({ store, ... })`: store, ttl, lockTimeout, concurrency. */
  idempotency: Idempotency
  /**
   * The caller a record belongs to (tenant or user id); may be async. The same key from two
   * scopes names two unrelated operations. Called only for mutations that carry a key; if it
   * throws, the request fails and nothing runs, and a value that is not a string, number, null
   * or undefined fails it with a TypeError. @default undefined (one shared scope, '')
   */
  scope?:
    | ((
        context: TContext,
      ) => string | number | null | undefined | PromiseLike<string | number | null | undefined>)
    | undefined
  /**
   * Finds the key itself, replacing the header, argument and extensions sources. Return
   * `undefined` or `null` for none. @default undefined (header, argument, extensions)
   */
  getKey?:
    | ((
        lookup: KeyLookup<TContext>,
      ) => string | null | undefined | PromiseLike<string | null | undefined>)
    | undefined
  /**
   * `'all'`: every mutation that carries a key is deduplicated. `'marked'`: only mutations with
   * a root field marked by `@idempotent` or `extensions.idempotency`; others run untouched.
   * @default 'all'
   */
  mode?: 'all' | 'marked' | undefined
  /**
   * The root-field argument (also looked for inside the field's `input` argument) and the
   * request `extensions` field that carry a key. @default 'idempotencyKey'
   */
  keyField?: string | undefined
  /**
   * Called with each error of a mutation's result, as the executor produced it (in Yoga,
   * before error masking, so `originalError` is there to inspect); the result is recorded only
   * if every call returns true, else the key is released so a retry runs again.
   * @default defaultStoreGraphQLErrors
   */
  storeErrors?: ((error: GraphQLError) => boolean) | undefined
  /** Where the plugin's diagnostics go. @default defaultLogger (console, prefixed) */
  logger?: Logger | undefined
  /**
   * Run each mutation operation in one database transaction with its record (the engine's
   * transactional mode; needs the Drizzle store, else a TypeError here): resolvers write
   * through `context.tx`, each root mutation field in its own savepoint, and the writes commit
   * with the recorded result or not at all. Mutations without a key get a transaction too.
   * @default undefined (the engine's `transactional`, itself false by default)
   */
  transactional?: boolean | undefined
  /** The context field that carries the transaction in transactional mode. @default 'tx' */
  transactionField?: string | undefined
  /**
   * Add `context.idempotency` (`deriveKey(name)`, `takeover`, `tx`) to the context of every
   * mutation the plugin runs. Transactional mode always adds it. For a mutation without a
   * key, `deriveKey` throws.
   * @default false
   */
  exposeContext?: boolean | undefined
}

/**
 * The fields the plugin adds to the GraphQL context of a mutation: `idempotency` (with
 * `exposeContext` or in transactional mode) and the transaction (`tx`, or your
 * `transactionField`, in transactional mode). Intersect it with your context type.
 */
export type IdempotencyContextFields<TTransaction = unknown, TField extends string = 'tx'> = {
  idempotency?: HandlerContext<TTransaction> | undefined
} & { [K in TField]?: TTransaction }

/** The Yoga server hooks the plugin adds to Envelop's; typed here so Yoga is not a dependency. */
export interface YogaHooks {
  onParams(payload: { context: object }): void
  onExecutionResult(payload: {
    context: object
    result: unknown
    setResult(result: ExecutionResult): void
  }): Promise<void> | undefined
  onResponse(payload: {
    request: Request
    response: Response
    setResponse(response: Response): void
  }): Promise<void> | undefined
}

export type IdempotencyPlugin<TContext extends DefaultContext = DefaultContext> = Plugin<TContext> &
  YogaHooks

/** The response header set on a replayed response (SPEC: `Idempotent-Replay: true`). */
export const replayHeader = 'Idempotent-Replay'

/**
 * The default for `storeErrors`: an error is deterministic, and recorded, when it is a
 * GraphQLError thrown on purpose (not one wrapping an unexpected exception, not marked
 * `unexpected` by a masker) whose `extensions.http.status`, if any, is below 500 and not
 * 408, 409 or 429 (those say "try again"). Anything else releases the key.
 */
export function defaultStoreGraphQLErrors(error: GraphQLError): boolean {
  if (!isOriginalGraphQLError(error)) return false
  const extensions = (error.extensions ?? {}) as {
    unexpected?: unknown | undefined
    http?: { status?: unknown } | undefined
  }
  if (extensions.unexpected === true) return false
  const status = extensions.http?.status
  if (typeof status !== 'number') return true
  return status < 500 && ![408, 409, 429].includes(status)
}

/**
 * Refuses keyed `@defer`/`@stream` mutations: the client gets an incremental stream, not one
 * result, and a replay could not be delivered the same way.
 */
function incrementalRefusal(transactional: boolean): GraphQLError {
  return new GraphQLError(
    transactional
      ? 'A mutation run in a database transaction cannot use @defer or @stream (the transaction would stay open across the stream): remove them.'
      : 'A mutation sent with an Idempotency-Key cannot use @defer or @stream: remove them, or send it without a key.',
    { extensions: { code: 'IDEMPOTENCY_INCREMENTAL_DELIVERY_UNSUPPORTED', http: { status: 400 } } },
  )
}

/**
 * Transactional mode runs each root mutation field's resolver in a savepoint, so a field that
 * throws (an expected error the result records) drops its own writes and keeps the other
 * fields'. Resolvers are wrapped once per schema, in place (as Envelop's `useOnResolve` does);
 * a wrapped resolver looks its operation up here and calls straight through for any other.
 */
const fieldSavepoints = new WeakMap<object, <T>(resolve: () => T | Promise<T>) => Promise<T>>()
const savepointWrapped = Symbol('idempotent-mutations: root field runs in a savepoint')

function runRootFieldsInSavepoints(schema: GraphQLSchema): void {
  const mutation = schema.getMutationType()
  if (!mutation) return
  for (const field of Object.values(mutation.getFields())) {
    const marked = field as GraphQLField<unknown, unknown> & { [savepointWrapped]?: true }
    if (marked[savepointWrapped]) continue
    const resolve = field.resolve ?? defaultFieldResolver
    field.resolve = (source, args, context, info) => {
      const inSavepoint =
        context !== null && typeof context === 'object' ? fieldSavepoints.get(context) : undefined
      if (!inSavepoint) return resolve(source, args, context, info)
      return inSavepoint(() => resolve(source, args, context, info))
    }
    marked[savepointWrapped] = true
  }
}

/** A keyed mutation this process is running under a lease, from `onExecute` to its end. */
interface Execution {
  lease: Lease
  /** The operation's GraphQL context. */
  context: object
  request: object | undefined
  /** Set once the executor returns: may the result be recorded (`storeErrors` kept each error)? */
  recordable: boolean | undefined
  settled: boolean
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return (
    value !== null &&
    typeof value === 'object' &&
    typeof (value as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function'
  )
}

/**
 * Makes mutations retry-safe in GraphQL Yoga and Envelop: a mutation operation that carries an
 * Idempotency-Key runs once, its whole `ExecutionResult` is recorded and replayed to every
 * retry. Queries, subscriptions and introspection are untouched.
 *
 * Where each step happens, and why:
 *
 *     onExecute          claim the key (engine `begin`): replay, answer an error, or run
 *     (executeFn)        decide with `storeErrors` on the executor's raw errors: after this,
 *                        a masked unexpected error looks like any other GraphQLError
 *     onExecuteDone      (plain Envelop) record the result as plugins before this one left it
 *     onExecutionResult  (Yoga) record the result as masked: Yoga's masking plugin is
 *                        registered after user plugins, so only this hook sees the client's form
 *     onResponse         (Yoga) set `Idempotent-Replay`, release any lease left unsettled
 *
 * Without Yoga (plain Envelop) there is no later hook: the result is recorded in
 * `onExecuteDone`, as masked by the plugins registered before this one.
 */
export function useIdempotency<TContext extends DefaultContext = DefaultContext>(
  options: UseIdempotencyOptions<TContext>,
): IdempotencyPlugin<TContext> {
  const { idempotency } = options
  if (!idempotency || typeof idempotency.begin !== 'function') {
    throw new TypeError(
      'idempotent-mutations: useIdempotency needs `idempotency` (from createIdempotency)',
    )
  }
  const mode = options.mode ?? 'all'
  if (mode !== 'all' && mode !== 'marked') {
    throw new TypeError(
      `idempotent-mutations: mode must be 'all' or 'marked' (got ${JSON.stringify(mode)})`,
    )
  }
  const keyField = options.keyField ?? defaultKeyField
  const storeErrors = options.storeErrors ?? defaultStoreGraphQLErrors
  const logger = options.logger ?? defaultLogger
  if (options.transactional === true) {
    assertTransactionalStore(idempotency.store, 'useIdempotency({ transactional: true })')
  }
  const transactional = options.transactional ?? idempotency.transactional ?? false
  const transactionField = options.transactionField ?? 'tx'
  const exposeContext = options.exposeContext === true

  /** Contexts Yoga runs an operation in (marked by `onParams`, a Yoga-only hook). */
  const yogaContexts = new WeakSet<object>()
  const executions = new WeakMap<object, Execution>()
  const unsettledByRequest = new WeakMap<object, Set<Execution>>()
  const replayedRequests = new WeakSet<object>()

  async function settle(execution: Execution, result: ExecutionResult | undefined): Promise<void> {
    if (execution.settled) return
    execution.settled = true
    if (execution.request) unsettledByRequest.get(execution.request)?.delete(execution)
    fieldSavepoints.delete(execution.context)
    if (result !== undefined && execution.recordable === true) {
      await execution.lease.complete(recordResult(result))
    } else {
      await execution.lease.release()
    }
  }

  /**
   * Settles, then makes the result the client gets tell the truth about a transaction: one that
   * did not commit (STORE_UNAVAILABLE: nothing happened; OUTCOME_UNKNOWN: its COMMIT was not
   * confirmed, so it may have happened; retry with the same key either way) or was rolled
   * back (its `data` describes writes that no longer exist, so it goes).
   */
  async function settleAndReport(
    execution: Execution,
    result: ExecutionResult | undefined,
    setResult: (result: ExecutionResult) => void,
  ): Promise<void> {
    try {
      await settle(execution, result)
    } catch (error) {
      if (!isIdempotencyError(error)) throw error
      setResult(errorResult(toGraphQLError(error)))
      return
    }
    const rolledBack = execution.lease.tx !== undefined && execution.recordable !== true
    if (rolledBack && result?.data != null) setResult({ ...result, data: null })
  }

  /** Whether `storeErrors` keeps every error of the result (a result without errors: yes). */
  function recordable(result: ExecutionResult): boolean {
    for (const error of result.errors ?? []) {
      let keep: boolean
      try {
        keep = storeErrors(error)
      } catch (thrown) {
        logger.error('storeErrors threw; the key is released', thrown)
        return false
      }
      if (keep !== true) return false
    }
    return true
  }

  /**
   * The operation's key: synchronous from the header, arguments and extensions, so a mutation
   * without one is let through without a promise (see protectMutation); a `getKey` is awaited.
   */
  function findKey(
    context: TContext,
    args: ExecutionArgs,
    fieldNames: readonly string[],
    argumentKeyList: () => string[],
  ): string | undefined | Promise<string | undefined> {
    const variables = (args.variableValues ?? {}) as Record<string, unknown>
    const { getKey } = options
    if (getKey) {
      return (async () => {
        const key = await getKey({
          context,
          // A copy: the analysis is shared by every request of this document (and frozen).
          fieldNames: [...fieldNames],
          document: args.document,
          operationName: args.operationName ?? undefined,
          variables,
        })
        return key === undefined || key === null ? undefined : validateKey(key)
      })()
    }
    const found: string[] = []
    const headers =
      (context.request as { headers?: unknown } | undefined)?.headers ??
      (context.req as { headers?: unknown } | undefined)?.headers
    const header = readKeyHeader(headers)
    if (header !== undefined) found.push(header)
    found.push(...argumentKeyList())
    const extensions = (context.params as { extensions?: Record<string, unknown> } | undefined)
      ?.extensions
    const extensionKey = extensions?.[keyField]
    if (extensionKey !== undefined && extensionKey !== null) found.push(validateKey(extensionKey))
    return agreeOnKey(...found)
  }

  async function findScope(context: TContext): Promise<string> {
    if (!options.scope) return ''
    return callerScope(await options.scope(context), 'scope(context)')
  }

  /**
   * Protects one mutation operation. A mutation that needs no record (no key, none required, not
   * transactional) is let through synchronously, before any promise: an `onExecute` that answers
   * with one puts Envelop's whole execution on its asynchronous path (about 1.5 % of an unkeyed
   * mutation's time over HTTP in Yoga).
   */
  function protectMutation(
    payload: OnExecuteEventPayload<TContext>,
    operation: OperationDefinitionNode,
  ):
    | OnExecuteHookResult<TContext>
    | Promise<OnExecuteHookResult<TContext> | undefined>
    | undefined {
    const { args, context, setResultAndStopExecution } = payload
    const variables = (args.variableValues ?? {}) as Record<string, unknown>
    const analysis = analyzeMutation(args.document, operation, variables)
    const policies = fieldPolicies(args.schema)
    const fieldPolicyList = analysis.fieldNames.map((name) => policies.get(name))
    if (mode === 'marked' && fieldPolicyList.every((policy) => policy === undefined)) return
    const policy = combinePolicies(fieldPolicyList)
    let key: string | undefined | Promise<string | undefined>
    try {
      key = findKey(context, args, analysis.fieldNames, () =>
        argumentKeys(analysis.rootFields, keyField, variables),
      )
    } catch (error) {
      if (!isIdempotencyError(error)) throw error
      setResultAndStopExecution(errorResult(toGraphQLError(error)))
      return
    }
    // `required` left to the engine counts as not required only when the engine says so.
    const required = policy.required ?? idempotency.required ?? true
    if (key === undefined && !required && !transactional) {
      // What the engine answers for it (a bypass), without asking it.
      if (exposeContext) {
        payload.extendContext({ idempotency: unkeyedContext } as unknown as Partial<TContext>)
      }
      return
    }
    return runProtected(payload, operation, analysis, policy, key)
  }

  async function runProtected(
    {
      args,
      context,
      executeFn,
      extendContext,
      setExecuteFn,
      setResultAndStopExecution,
    }: OnExecuteEventPayload<TContext>,
    operation: OperationDefinitionNode,
    analysis: MutationAnalysis,
    { required, ttl }: ReturnType<typeof combinePolicies>,
    foundKey: string | undefined | Promise<string | undefined>,
  ): Promise<OnExecuteHookResult<TContext> | undefined> {
    // The context's type is the user's; the fields added here are theirs to declare
    // (IdempotencyContextFields).
    const addToContext = (fields: Record<string, unknown>) =>
      extendContext(fields as unknown as Partial<TContext>)
    const variables = (args.variableValues ?? {}) as Record<string, unknown>
    const request = (context.request ?? undefined) as object | undefined

    let attempt: Awaited<ReturnType<Idempotency['begin']>>
    try {
      const key = await foundKey
      if ((key !== undefined || transactional) && analysis.incremental) {
        setResultAndStopExecution(errorResult(incrementalRefusal(key === undefined)))
        return
      }
      attempt = await idempotency.begin({
        key,
        operation: analysis.fieldNames.join(','),
        scope: key === undefined ? '' : await findScope(context),
        // Only a keyed call is fingerprinted; the engine passes the others through.
        payload: key === undefined ? undefined : fingerprintPayload(operation, analysis, variables),
        required,
        ttl,
        transactional,
      })
    } catch (error) {
      if (!isIdempotencyError(error)) throw error
      setResultAndStopExecution(errorResult(toGraphQLError(error)))
      return
    }

    if (attempt.kind === 'bypass') {
      if (exposeContext) addToContext({ idempotency: unkeyedContext })
      return
    }
    if (attempt.kind === 'replay') {
      const { outcome } = attempt
      if (!outcome.ok || !isRecordedResult(outcome.value)) {
        // Only this plugin writes records under GraphQL operation names; anything else there
        // (another adapter sharing names and keys, a damaged record) is not replayed as a
        // GraphQL result: the operation ran, and its answer cannot be replayed.
        logger.error(
          `the record of mutation ${analysis.fieldNames.join(',')} was not written by the GraphQL plugin; its retries get RESPONSE_NOT_STORED`,
        )
        setResultAndStopExecution(errorResult(toGraphQLError(new ResponseNotStoredError())))
        return
      }
      if (request) replayedRequests.add(request)
      setResultAndStopExecution(replayResult(outcome.value))
      return
    }

    const yoga = yogaContexts.has(context)
    const { lease } = attempt
    const execution: Execution = {
      lease,
      context,
      request,
      recordable: undefined,
      settled: false,
    }
    if (lease.tx !== undefined || exposeContext) {
      // A view of the lease without its settling methods; `tx` follows the current savepoint.
      const view: HandlerContext<unknown> = {
        takeover: lease.takeover,
        deriveKey: lease.deriveKey,
        ...(lease.tx === undefined ? {} : { tx: lease.tx }),
      }
      addToContext(
        lease.tx === undefined
          ? { idempotency: view }
          : { idempotency: view, [transactionField]: lease.tx },
      )
      const { savepoint } = lease
      if (savepoint) {
        const fields = context as Record<string, unknown>
        fieldSavepoints.set(context, (resolveField) =>
          savepoint(async (fieldTx) => {
            const previous = fields[transactionField]
            fields[transactionField] = fieldTx
            view.tx = fieldTx
            try {
              return await resolveField()
            } finally {
              fields[transactionField] = previous
              view.tx = previous
            }
          }),
        )
      }
    }
    if (yoga) {
      executions.set(context, execution)
      if (request) {
        const unsettled = unsettledByRequest.get(request) ?? new Set<Execution>()
        unsettledByRequest.set(request, unsettled)
        unsettled.add(execution)
      }
    }
    // The executor's own result, before any onExecuteDone hook (maskers included) touched it:
    // the one place where an error thrown on purpose and an unexpected one still differ.
    setExecuteFn(async (executionArgs) => {
      let result: Awaited<ReturnType<typeof executeFn>>
      try {
        result = await executeFn(executionArgs)
      } catch (error) {
        // Envelop runs no onExecuteDone for an executor that throws. Yoga still reports the
        // request's end (onExecutionResult, onResponse); plain Envelop does not, so the key is
        // released here rather than left in progress until its lease ends.
        if (!yoga) await settle(execution, undefined)
        throw error
      }
      execution.recordable = !isAsyncIterable(result) && recordable(result)
      return result
    })
    return {
      async onExecuteDone({ result, setResult }) {
        if (isAsyncIterable(result)) {
          // Incremental delivery slipped past the document check (a plugin turned the result
          // into a stream): it cannot be recorded, so the key is released.
          logger.warn(
            `mutation ${analysis.fieldNames.join(',')} returned a stream; its result was not recorded and the key was released`,
          )
          execution.recordable = false
        } else if (execution.recordable === undefined) {
          // A later plugin replaced the executor, so its raw result was never seen: judge the
          // result as it stands here.
          execution.recordable = recordable(result)
        }
        if (yoga) return
        // Without Yoga, this result is what gets recorded. An error in it that still wraps an
        // unexpected exception has not been masked yet (a masker registered after this plugin)
        // and must never be replayed.
        const visible = isAsyncIterable(result) ? undefined : result
        if (visible?.errors?.some((error) => !isOriginalGraphQLError(error))) {
          execution.recordable = false
        }
        await settleAndReport(execution, visible, setResult)
      },
    }
  }

  const plugin: IdempotencyPlugin<TContext> = {
    onSchemaChange({ schema }) {
      // Reads (and checks) the directive and extensions once, so a malformed option fails at
      // startup instead of on a request.
      fieldPolicies(schema)
      if (transactional) runRootFieldsInSavepoints(schema)
    },

    onExecute(payload) {
      const { args } = payload
      const operation = getOperationAST(args.document, args.operationName)
      // Queries and everything else pass through synchronously: no store call, no extra tick.
      if (operation?.operation !== 'mutation') return
      return protectMutation(payload, operation)
    },

    onParams({ context }) {
      yogaContexts.add(context)
    },

    onExecutionResult({ context, result, setResult }) {
      const execution = executions.get(context)
      if (!execution) return undefined
      executions.delete(context)
      return settleAndReport(
        execution,
        result === undefined || isAsyncIterable(result) ? undefined : (result as ExecutionResult),
        setResult,
      )
    },

    onResponse({ request, response, setResponse }) {
      const unsettled = unsettledByRequest.get(request)
      unsettledByRequest.delete(request)
      if (replayedRequests.has(request)) {
        try {
          response.headers.set(replayHeader, 'true')
        } catch {
          // A response with immutable headers: copy it with the header added.
          const headers = new Headers(response.headers)
          headers.set(replayHeader, 'true')
          setResponse(
            new Response(response.body, {
              status: response.status,
              statusText: response.statusText,
              headers,
            }),
          )
        }
      }
      if (!unsettled?.size) return undefined
      // An operation whose end Yoga never reported (it threw past every hook): release its key
      // now rather than let it wait for the lease to run out.
      return Promise.all([...unsettled].map((execution) => settle(execution, undefined))).then(
        () => undefined,
      )
    },
  }
  return plugin
}
