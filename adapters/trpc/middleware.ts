import type { TRPCError, TRPCProcedureType } from '@trpc/server'
import type { MiddlewareResult } from '@trpc/server/unstable-core-do-not-import'
import {
  type Duration,
  type HandlerContext,
  isIdempotencyError,
  type Lease,
  type OperationRequest,
} from '../../src'
import { unkeyedContext } from '../../src/engine/lease'
import { agreeOnKey, splitInputKey } from '../../src/key'
import {
  type AdapterOptions,
  type AdapterSettings,
  contextFields,
  findScope,
  keyFromGetKey,
  replayHeader,
  resolveAdapterOptions,
  runUnderOperation,
  settleFailure,
} from '../kit'
import { inBatchOrder, type Ran } from './batch-order'
import { defaultTRPCStoreErrors, replayError, type TRPCRootLike, toTRPCError } from './errors'
import { batchRequestOf, headerKeyOf, setResponseHeader } from './http'
import { replayedResult } from './result'
import { recordablePlain, replayable } from './stream'
import { callFailurePolicy, handOverStream, type StreamCallInfo } from './stream-lease'

/** Per-procedure settings, given with `.meta({ idempotency: { ... } })`. */
export interface IdempotencyProcedureOptions {
  /** Reject calls without a key with 400 `KEY_REQUIRED`. @default the middleware's `required` */
  required?: boolean | undefined
  /** How long this procedure's completed records are replayed. @default the engine's `ttl` ('24h') */
  ttl?: Duration | undefined
  /** How long an execution holds its lease. @default the engine's `lockTimeout` ('60s') */
  lockTimeout?: Duration | undefined
}

/** The meta type that carries {@link IdempotencyProcedureOptions}: `initTRPC.meta<IdempotencyMeta>()`. */
export interface IdempotencyMeta {
  /** This procedure's idempotency settings. @default undefined (the middleware's and engine's) */
  idempotency?: IdempotencyProcedureOptions | undefined
}

/** What `scope` and `getKey` are told about the call. */
export interface IdempotencyCallInfo<TContext> {
  ctx: TContext
  /** The procedure path, such as `orders.create`. */
  path: string
  /** The input as the client sent it, before validators and defaults (key field included). */
  input: unknown
}

/**
 * The middleware's options: the common ones of every adapter ({@link AdapterOptions}: `scope`
 * and `getKey` get {@link IdempotencyCallInfo}, `storeErrors` the `TRPCError`, by default
 * {@link defaultTRPCStoreErrors}), and `root`. `transactional: true` also types `ctx.tx` and
 * `ctx.idempotency`; `exposeContext: true` types `ctx.idempotency`.
 */
export interface IdempotencyMiddlewareOptions<TContext = object, TTransaction = unknown>
  extends AdapterOptions<IdempotencyCallInfo<TContext>, TRPCError, TTransaction> {
  /**
   * Your tRPC root, `t` from `initTRPC...create()`. With it, a recorded error keeps the exact
   * shape your `errorFormatter` gave it, and the first caller and every retry get that same
   * shape, even when the formatter reads what a record cannot keep (`error.cause instanceof
   * ZodError`). Without it, a replayed error keeps its code, message and a JSON copy of its
   * cause, and your `errorFormatter` formats it again.
   * @default undefined
   */
  root?: TRPCRootLike | undefined
}

/** The context fields a transactional middleware adds: `ctx.tx` (or your name) and `ctx.idempotency`. */
export type IdempotencyTransactionContext<TTransaction, TField extends string = 'tx'> = {
  idempotency: HandlerContext<TTransaction>
} & { [K in TField]: TTransaction }

/**
 * The middleware `createIdempotencyMiddleware` returns. It is written out, rather than taken
 * from tRPC's generic middleware type, so that `TContext` is inferred from the procedure it is
 * used on (`scope: ({ ctx }) => ctx.user.id` type-checks). `TAdded` is what it adds to the
 * context's type: nothing, unless it is transactional or `exposeContext` is on.
 */
export type IdempotencyMiddleware<TContext = object, TAdded extends object = object> = (opts: {
  ctx: TContext
  type: TRPCProcedureType
  path: string
  input: unknown
  getRawInput: () => Promise<unknown>
  meta: IdempotencyMeta | undefined
  signal: AbortSignal | undefined
  batchIndex: number
  next: (opts?: { ctx: object }) => Promise<MiddlewareResult<object>>
}) => Promise<MiddlewareResult<TAdded>>

type Next = (opts?: { ctx: object }) => Promise<MiddlewareResult<object>>

function withoutField(input: unknown, field: string): unknown {
  if (input === null || typeof input !== 'object' || Array.isArray(input) || !(field in input)) {
    return input
  }
  const { [field]: _key, ...rest } = input as Record<string, unknown>
  return rest
}

/**
 * Rethrows `error`, an engine error as the `TRPCError` a client gets. Called from `catch`
 * blocks around the engine's calls (inline, not through a wrapping callback: these are on
 * every keyed call's path).
 */
function rethrowTranslated(ctx: unknown, error: unknown): never {
  if (!isIdempotencyError(error)) throw error
  if (error.retryAfter !== undefined) {
    setResponseHeader(ctx, 'Retry-After', String(error.retryAfter))
  }
  throw toTRPCError(error)
}

/**
 * The engine's request for one mutation call: its key (from `getKey`, or from the header and
 * the input field, which must agree), its scope (only keyed calls need one) and its payload
 * (the input without the key field), with the procedure's `meta.idempotency` on top. Without
 * `getKey` and `scope` it is made synchronously: no promise on every mutation's path.
 */
function operationRequest(
  call: IdempotencyCallInfo<unknown>,
  meta: IdempotencyMeta | undefined,
  options: IdempotencyMiddlewareOptions<unknown>,
  settings: AdapterSettings<TRPCError>,
): OperationRequest | Promise<OperationRequest> {
  const procedure = meta?.idempotency
  const request: OperationRequest = {
    key: undefined,
    operation: call.path,
    scope: '',
    payload: call.input,
    required: procedure?.required ?? settings.required,
    ttl: procedure?.ttl,
    lockTimeout: procedure?.lockTimeout,
    transactional: settings.transactional,
    adapter: settings.adapter,
  }
  const { getKey } = options
  if (getKey) {
    return keyFromGetKey(getKey, call).then((key) => {
      request.key = key
      request.payload = withoutField(call.input, settings.keyField)
      return withScope(request, call, options)
    })
  }
  const fromInput = splitInputKey(call.input, settings.keyField)
  request.key = agreeOnKey(headerKeyOf(call.ctx), fromInput.key)
  request.payload = fromInput.payload
  return withScope(request, call, options)
}

/** The request with its caller's scope: only keyed calls need one, and only `scope` gives one. */
function withScope(
  request: OperationRequest,
  call: IdempotencyCallInfo<unknown>,
  options: IdempotencyMiddlewareOptions<unknown>,
): OperationRequest | Promise<OperationRequest> {
  // A scope that throws fails the call: there is no shared fallback.
  if (request.key === undefined || !options.scope) return request
  return findScope(options.scope, call, 'scope({ ctx, path, input })').then((scope) => {
    request.scope = scope
    return request
  })
}

/**
 * Calls the procedure, with `ctx.idempotency` (a view of the lease without its settling
 * methods) and the transaction in the context when there is one or it was asked for.
 */
function runProcedure(
  next: Next,
  lease: HandlerContext<unknown>,
  settings: AdapterSettings<TRPCError>,
): Promise<MiddlewareResult<object>> {
  const fields = contextFields(lease, settings)
  return fields === undefined ? next() : next({ ctx: fields })
}

/**
 * Runs the procedure under `lease` and settles the lease exactly once: completed with the
 * output, completed with a deterministic error or released (the failure policy), and for a
 * streamed output once tRPC has read it (`settled`).
 */
async function settleLease(
  lease: Lease,
  procedure: () => Promise<MiddlewareResult<object>>,
  call: StreamCallInfo,
): Promise<Ran> {
  let result: MiddlewareResult<object>
  let output: unknown
  try {
    result = await procedure()
    if (result.ok) {
      const handover = handOverStream(result, lease, call)
      if (handover.kind === 'streaming') {
        return { result: handover.result, settled: handover.settled }
      }
      result = handover.result
    }
    if (result.ok) output = recordablePlain(result.data)
  } catch (error) {
    // tRPC turns the procedure's throws into `{ ok: false }`; anything else that throws here
    // must not leave the key in progress until its lease ends.
    await lease.release()
    throw error
  }
  // In transactional mode completing commits: a commit that failed (nothing happened)
  // reaches the client as 503 STORE_UNAVAILABLE, one whose answer was lost (it may have
  // happened) as 503 OUTCOME_UNKNOWN; either way, retry with the same key.
  const settling = result.ok
    ? lease.complete(output)
    : settleFailure(lease, result.error, callFailurePolicy(call))
  await settling.catch((error) => rethrowTranslated(call.ctx, error))
  return { result }
}

/**
 * Makes tRPC mutations retry-safe: `t.procedure.use(createIdempotencyMiddleware({ idempotency }))`.
 * Queries and subscriptions pass through untouched. A mutation with a key runs once per
 * (scope, procedure path, key); every retry gets the recorded result or error, with
 * `Idempotent-Replay: true`. With `transactional: true`, the procedure's context gets the
 * transaction its writes must go through (`ctx.tx`) and `ctx.idempotency`.
 */
export function createIdempotencyMiddleware<
  TContext = object,
  TTransaction = unknown,
  TField extends string = 'tx',
>(
  options: IdempotencyMiddlewareOptions<TContext, TTransaction> & {
    transactional: true
    transactionField?: TField | undefined
  },
): IdempotencyMiddleware<TContext, IdempotencyTransactionContext<TTransaction, TField>>
export function createIdempotencyMiddleware<TContext = object, TTransaction = unknown>(
  options: IdempotencyMiddlewareOptions<TContext, TTransaction> & { exposeContext: true },
): IdempotencyMiddleware<TContext, { idempotency: HandlerContext<TTransaction> }>
export function createIdempotencyMiddleware<TContext = object>(
  options: IdempotencyMiddlewareOptions<TContext>,
): IdempotencyMiddleware<TContext>
export function createIdempotencyMiddleware<TContext = object>(
  options: IdempotencyMiddlewareOptions<TContext>,
): IdempotencyMiddleware<TContext, object> {
  const settings = resolveAdapterOptions(
    options,
    'createIdempotencyMiddleware',
    defaultTRPCStoreErrors,
    'trpc',
  )
  const { idempotency, logger, storeErrors } = settings
  const { root } = options
  const callOptions = options as IdempotencyMiddlewareOptions<unknown>

  return async function idempotencyMiddleware(opts) {
    if (opts.type !== 'mutation') return opts.next()
    const { ctx, path, next, signal } = opts
    const input = await opts.getRawInput()
    let request: OperationRequest
    try {
      const made = operationRequest({ ctx, path, input }, opts.meta, callOptions, settings)
      request = made instanceof Promise ? await made : made
    } catch (error) {
      rethrowTranslated(ctx, error)
    }

    const run = async (): Promise<Ran> => {
      let attempt: Awaited<ReturnType<typeof idempotency.begin>>
      try {
        attempt = await idempotency.begin(request)
      } catch (error) {
        rethrowTranslated(ctx, error)
      }
      if (attempt.kind === 'bypass') {
        return { result: await runProcedure(next, unkeyedContext, settings) }
      }
      if (attempt.kind === 'replay') {
        setResponseHeader(ctx, replayHeader, 'true')
        const { outcome } = attempt
        if (outcome.ok) return { result: replayedResult(replayable(outcome.value)) }
        throw replayError(outcome.error)
      }
      const { lease } = attempt
      const call = { ctx, path, input, root, storeErrors, logger, signal }
      const procedure = () => runUnderOperation(lease, () => runProcedure(next, lease, settings))
      return settleLease(lease, procedure, call)
    }

    const batch = request.key === undefined ? undefined : batchRequestOf(ctx)
    if (batch === undefined) return (await run()).result
    return inBatchOrder(batch, JSON.stringify([request.scope, path, request.key]), run)
  }
}
