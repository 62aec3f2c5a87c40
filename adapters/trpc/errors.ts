import { type TRPC_ERROR_CODE_KEY, TRPCError } from '@trpc/server'
import * as trpcCore from '@trpc/server/unstable-core-do-not-import'
import {
  type IdempotencyError,
  type IdempotencyErrorCode,
  isIdempotencyError,
  ResponseNotStoredError,
} from '../../src'
import { isDeterministicStatus } from '../kit'

/**
 * Formatted error shapes (`.errors()` on a procedure) arrived in a later tRPC 11 minor. Read
 * through the namespace so the adapter still loads on an earlier 11.x, where a recorded shape
 * simply cannot be attached and the error is formatted again on replay.
 */
const core = trpcCore as Partial<typeof trpcCore>
type ErrorShape = Parameters<typeof trpcCore.setFormattedErrorShape>[1]
const attachShape: ((error: TRPCError, shape: ErrorShape) => void) | undefined =
  core.setFormattedErrorShape

/** How each engine error reaches a tRPC client (SPEC: 400, 422, 409, 503). */
export const trpcCodeForIdempotencyError: Readonly<
  Record<IdempotencyErrorCode, TRPC_ERROR_CODE_KEY>
> = {
  KEY_REQUIRED: 'BAD_REQUEST',
  KEY_INVALID: 'BAD_REQUEST',
  KEY_REUSED: 'UNPROCESSABLE_CONTENT',
  RESPONSE_NOT_STORED: 'UNPROCESSABLE_CONTENT',
  IN_PROGRESS: 'CONFLICT',
  STORE_UNAVAILABLE: 'SERVICE_UNAVAILABLE',
  OUTCOME_UNKNOWN: 'SERVICE_UNAVAILABLE',
}

/** Wraps an engine error in the `TRPCError` a client gets, keeping it as the `cause`. */
export function toTRPCError(error: IdempotencyError): TRPCError {
  return new TRPCError({
    code: trpcCodeForIdempotencyError[error.code],
    message: error.message,
    cause: error,
  })
}

/**
 * The engine error behind a `TRPCError`, if there is one. Use it in an `errorFormatter` to hand
 * clients the stable SPEC code (`KEY_REUSED`, `IN_PROGRESS`, ...) and `retryAfter`.
 */
export function getIdempotencyError(error: unknown): IdempotencyError | undefined {
  if (isIdempotencyError(error)) return error
  if (error instanceof Error && isIdempotencyError(error.cause)) return error.cause
  return undefined
}

/** The HTTP status of a tRPC error code (tRPC's own table when it has one). */
function httpStatusOf(error: TRPCError): number {
  return core.getHTTPStatusCodeFromError?.(error) ?? 500
}

/**
 * The adapter's default failure policy (SPEC "Failures of the operation itself"):
 * {@link isDeterministicStatus} read from the HTTP status of the `TRPCError`'s code, so a 4xx
 * other than 408, 409 and 429 is recorded and replayed, except 499 (the client went away
 * mid-call), which says nothing about the operation. Anything else, including plain throws
 * (tRPC turns them into INTERNAL_SERVER_ERROR), releases the key.
 */
export function defaultTRPCStoreErrors(error: TRPCError): boolean {
  if (!(error instanceof TRPCError)) return false
  const status = httpStatusOf(error)
  return status !== 499 && isDeterministicStatus(status)
}

/** A recorded `TRPCError`, as the engine's codec stores it. */
export interface RecordedTRPCError {
  /** Marks the record as this adapter's, so a foreign or damaged record is not trusted. */
  kind: 'trpc-error'
  code: TRPC_ERROR_CODE_KEY
  message: string
  /** A JSON copy of the cause (name, message, own data fields), for formatters that read it. */
  cause?: Record<string, unknown> | undefined
  /** The exact shape the client got, when it was known at record time. */
  shape?: unknown | undefined
}

/** Where a recorded error shape comes from: the root config of `t = initTRPC.create()`. */
export interface TRPCRootLike {
  _config: Parameters<typeof trpcCore.getErrorShape>[0]['config']
}

/** Copies what JSON can hold of an error's own fields; internals (`_zod`, `stack`) stay out. */
function snapshotCause(cause: unknown): Record<string, unknown> | undefined {
  if (!(cause instanceof Error)) return undefined
  const fields: Record<string, unknown> = {}
  for (const name of Object.getOwnPropertyNames(cause)) {
    if (name === 'stack' || name === 'cause' || name.startsWith('_')) continue
    try {
      const text = JSON.stringify((cause as unknown as Record<string, unknown>)[name])
      if (text !== undefined) fields[name] = JSON.parse(text)
    } catch {
      // A field JSON cannot copy (a BigInt, a cycle) is left out rather than failing the record.
    }
  }
  return { ...fields, name: cause.name, message: cause.message }
}

export interface RecordErrorContext {
  root: TRPCRootLike | undefined
  path: string
  input: unknown
  ctx: unknown
}

/**
 * Turns a deterministic `TRPCError` into record data. When the final shape is known, it is
 * recorded and also attached to this first error, so the first caller and every retry get the
 * very same shape, even when the formatter reads things a record cannot keep (a zod error in
 * `cause`, a class checked with instanceof). The shape is known when a procedure-level
 * `.errors()` formatter below this middleware already formatted the error, or when `root`
 * lets the adapter run the root `errorFormatter` now.
 */
export function recordError(error: TRPCError, context: RecordErrorContext): RecordedTRPCError {
  let shape = core.getFormattedErrorShape?.(error)
  if (
    shape === undefined &&
    context.root !== undefined &&
    core.getErrorShape !== undefined &&
    attachShape !== undefined
  ) {
    shape = core.getErrorShape({
      config: context.root._config,
      error,
      type: 'mutation',
      path: context.path,
      input: context.input,
      ctx: context.ctx,
    })
    if (shape !== undefined) attachShape(error, shape)
  }
  const recorded: RecordedTRPCError = {
    kind: 'trpc-error',
    code: error.code,
    message: error.message,
  }
  const cause = snapshotCause(error.cause)
  if (cause !== undefined) recorded.cause = cause
  if (shape !== undefined) recorded.shape = shape
  return recorded
}

function isRecordedTRPCError(data: unknown): data is RecordedTRPCError {
  if (data === null || typeof data !== 'object') return false
  const record = data as Partial<RecordedTRPCError>
  return (
    record.kind === 'trpc-error' &&
    typeof record.message === 'string' &&
    typeof record.code === 'string' &&
    record.code in trpcCore.TRPC_ERROR_CODES_BY_KEY
  )
}

/**
 * Rebuilds the `TRPCError` a retry gets: same code and message, a plain copy of the cause, and,
 * when one was recorded, the exact shape the first caller got (tRPC then sends it as is).
 */
export function replayError(data: unknown): TRPCError {
  // A record this adapter cannot read (damaged, or another adapter's): the operation ran, and
  // what it answered cannot be replayed, which is what RESPONSE_NOT_STORED says.
  if (!isRecordedTRPCError(data)) return toTRPCError(new ResponseNotStoredError())
  let cause: Error | undefined
  if (data.cause !== undefined) {
    const { name, message, ...fields } = data.cause
    cause = Object.assign(new Error(typeof message === 'string' ? message : ''), fields)
    if (typeof name === 'string') cause.name = name
  }
  const error = new TRPCError({ code: data.code, message: data.message, cause })
  if (data.shape !== undefined && attachShape !== undefined) {
    attachShape(error, data.shape as ErrorShape)
  }
  return error
}
