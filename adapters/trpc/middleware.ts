import type { TRPCError, TRPCProcedureType } from '@trpc/server'
import type { MiddlewareResult } from '@trpc/server/unstable-core-do-not-import'
import {
  type Duration,
  type HandlerContext,
  type Idempotency,
  isIdempotencyError,
  type Lease,
  type OperationRequest,
} from '../../src'
import { unkeyedContext } from '../../src/engine/lease'
import { assertTransactionalStore } from '../../src/engine/options'
import { agreeOnKey, callerScope, defaultKeyField, splitInputKey } from '../../src/key'
import { inBatchOrder, type Ran } from './batch-order'
import {
  defaultTRPCStoreErrors,
  recordError,
  replayError,
  type TRPCRootLike,
  toTRPCError,
} from './errors'
import { batchRequestOf, headerKeyOf, setResponseHeader } from './http'
import { replayedResult } from './result'
import { recordablePlain, replayable } from './stream'
import { handOverStream, type StreamCallInfo } from './stream-lease'

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

export interface IdempotencyMiddlewareOptions<TContext = object, TTransaction = unknown> {
  /** The engine: `createIdempotency({ store, ... })`. */
  idempotency: Idempotency<TTransaction>
  /**
   * Who is asking (a tenant or user id). Records of different scopes never meet; the procedure
   * path is always added as the operation. May be async. If it throws, the call fails: it never
   * falls back to a shared scope; a value of another type (an object) fails it with a TypeError.
   * Called only for calls that carry a key.
   * @default () => '' (one scope for every caller)
   */
  scope?:
    | ((
        info: IdempotencyCallInfo<TContext>,
      ) => string | number | null | undefined | Promise<string | number | null | undefined>)
    | undefined
  /**
   * Finds the key yourself; replaces both the `Idempotency-Key` header and the input field.
   * Return `undefined` or `null` for "no key". May be async.
   * @default undefined (header and input field)
   */
  getKey?:
    | ((
        info: IdempotencyCallInfo<TContext>,
      ) => string | null | undefined | Promise<string | null | undefined>)
    | undefined
  /**
   * The input field that carries a per-call key. It is not part of the fingerprint.
   * @default 'idempotencyKey'
   */
  keyField?: string | undefined
  /**
   * Reject mutations without a key with 400 `KEY_REQUIRED`; a procedure's
   * `meta.idempotency.required` overrides it.
   * @default undefined (the engine's `required`, itself false by default)
   */
  required?: boolean | undefined
  /**
   * Which failures are recorded and replayed (true) instead of releasing the key. Called with the
   * `TRPCError` the procedure failed with (a plain throw arrives as INTERNAL_SERVER_ERROR with
   * the original in `cause`).
   * @default defaultTRPCStoreErrors (4xx codes except 408, 409, 429 and 499)
   */
  storeErrors?: ((error: TRPCError) => boolean) | undefined
  /**
   * Your tRPC root, `t` from `initTRPC...create()`. With it, a recorded error keeps the exact
   * shape your `errorFormatter` gave it, and the first caller and every retry get that same
   * shape, even when the formatter reads what a record cannot keep (`error.cause instanceof
   * ZodError`). Without it, a replayed error keeps its code, message and a JSON copy of its
   * cause, and your `errorFormatter` formats it again.
   * @default undefined
   */
  root?: TRPCRootLike | undefined
  /**
   * Run each mutation in one database transaction with its record (the engine's transactional
   * mode; needs the Drizzle store, else a TypeError here): the procedure writes through
   * `ctx.tx`, and its writes commit with the recorded outcome or not at all. Mutations without
   * a key get a transaction too. `true` also types `ctx.tx` and `ctx.idempotency`.
   * @default undefined (the engine's `transactional`, itself false by default)
   */
  transactional?: boolean | undefined
  /** The context field that carries the transaction in transactional mode. @default 'tx' */
  transactionField?: string | undefined
  /**
   * Add `ctx.idempotency` ({@link HandlerContext}: `deriveKey(name)`, `takeover`, `tx`) to the
   * context of every mutation the middleware runs, and to the context's type. Transactional mode
   * always adds it. For a mutation without a key, `deriveKey` throws.
   * @default false
   */
  exposeContext?: boolean | undefined
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
 * Runs the procedure under `lease` and settles the lease exactly once: completed with the
 * result, completed with a deterministic error, or released so a retry can run again. A
 * streamed output is recorded once tRPC has read it: its lease settles then (`settled`).
 */
async function settleLease(
  lease: Lease,
  procedure: () => Promise<MiddlewareResult<object>>,
  call: StreamCallInfo,
): Promise<Ran> {
  const { ctx, storeErrors } = call
  let settled = false
  try {
    let result = await procedure()
    if (result.ok) {
      const handover = handOverStream(result, lease, call)
      if (handover.kind === 'streaming') {
        settled = true
        return { result: handover.result, settled: handover.settled }
      }
      result = handover.result
    }
    // In transactional mode completing commits: a commit that failed (nothing happened)
    // reaches the client as 503 STORE_UNAVAILABLE, one whose answer was lost (it may have
    // happened) as 503 OUTCOME_UNKNOWN; either way, retry with the same key.
    if (result.ok) {
      settled = true
      await lease
        .complete(recordablePlain(result.data))
        .catch((error) => rethrowTranslated(ctx, error))
    } else if (storeErrors(result.error)) {
      const recorded = recordError(result.error, call)
      settled = true
      await lease.completeWithError(recorded).catch((error) => rethrowTranslated(ctx, error))
    } else {
      settled = true
      await lease.release()
    }
    return { result }
  } finally {
    // tRPC turns throws into `{ ok: false }`, but a throwing `storeErrors` or error
    // formatter must not leave the key in progress until its lease ends.
    if (!settled) await lease.release()
  }
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
  const { idempotency, root } = options
  if (!idempotency || typeof idempotency.begin !== 'function') {
    throw new TypeError(
      'idempotent-mutations: createIdempotencyMiddleware needs `idempotency` (from createIdempotency)',
    )
  }
  if (options.transactional === true) {
    assertTransactionalStore(
      idempotency.store,
      'createIdempotencyMiddleware({ transactional: true })',
    )
  }
  const keyField = options.keyField ?? defaultKeyField
  const storeErrors = options.storeErrors ?? defaultTRPCStoreErrors
  const transactionField = options.transactionField ?? 'tx'
  const exposeContext = options.exposeContext === true

  /**
   * Calls the procedure, with `ctx.idempotency` (a view of the lease without its settling
   * methods) and the transaction in the context when there is one or it was asked for.
   */
  function runProcedure(
    next: (opts?: { ctx: object }) => Promise<MiddlewareResult<object>>,
    handlerContext: HandlerContext<unknown>,
  ): Promise<MiddlewareResult<object>> {
    const { tx } = handlerContext
    if (tx === undefined && !exposeContext) return next()
    const view: HandlerContext<unknown> = {
      takeover: handlerContext.takeover,
      deriveKey: handlerContext.deriveKey,
      ...(tx === undefined ? {} : { tx }),
    }
    return next({
      ctx: tx === undefined ? { idempotency: view } : { idempotency: view, [transactionField]: tx },
    })
  }

  return async function idempotencyMiddleware(opts) {
    if (opts.type !== 'mutation') return opts.next()
    const { ctx, path, meta, next } = opts
    const input = await opts.getRawInput()
    const info = { ctx, path, input }

    let key: string | undefined
    let payload: unknown
    try {
      if (options.getKey) {
        key = (await options.getKey(info)) ?? undefined
        payload = withoutField(input, keyField)
      } else {
        const fromInput = splitInputKey(input, keyField)
        key = agreeOnKey(headerKeyOf(ctx), fromInput.key)
        payload = fromInput.payload
      }
    } catch (error) {
      rethrowTranslated(ctx, error)
    }
    // Only keyed calls need a scope; a scope that throws fails the call (no shared fallback).
    const scope = key === undefined || !options.scope ? undefined : await options.scope(info)
    const settings = meta?.idempotency
    const request: OperationRequest = {
      key,
      operation: path,
      scope: callerScope(scope, 'scope({ ctx, path, input })'),
      payload,
      required: settings?.required ?? options.required,
      ttl: settings?.ttl,
      lockTimeout: settings?.lockTimeout,
      transactional: options.transactional,
    }

    const run = async (): Promise<Ran> => {
      let attempt: Awaited<ReturnType<typeof idempotency.begin>>
      try {
        attempt = await idempotency.begin(request)
      } catch (error) {
        rethrowTranslated(ctx, error)
      }
      if (attempt.kind === 'bypass') return { result: await runProcedure(next, unkeyedContext) }
      if (attempt.kind === 'replay') {
        setResponseHeader(ctx, 'Idempotent-Replay', 'true')
        const { outcome } = attempt
        if (outcome.ok) return { result: replayedResult(replayable(outcome.value)) }
        throw replayError(outcome.error)
      }
      const { lease } = attempt
      const call = { ctx, path, input, root, storeErrors, signal: opts.signal }
      return settleLease(lease, () => runProcedure(next, lease), call)
    }

    const batch = key === undefined ? undefined : batchRequestOf(ctx)
    if (batch === undefined) return (await run()).result
    return inBatchOrder(batch, JSON.stringify([request.scope, path, key]), run)
  }
}
