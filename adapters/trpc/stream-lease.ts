import { getTRPCErrorFromUnknown, TRPCError } from '@trpc/server'
import type { MiddlewareResult } from '@trpc/server/unstable-core-do-not-import'
import type { Lease, Logger } from '../../src'
import { type FailurePolicy, failurePolicy, recordedFailure } from '../kit'
import { recordError, type TRPCRootLike } from './errors'
import { isDataStream, isStreamed, streamsResponse, unstreamedRefusal } from './stream'
import { recordStream } from './stream-record'

export interface StreamCallInfo {
  ctx: unknown
  path: string
  input: unknown
  root: TRPCRootLike | undefined
  storeErrors: (error: TRPCError) => boolean
  /** Where a `storeErrors` or error formatter that throws is reported: the engine's logger. */
  logger: Logger
  /** The call's abort signal: a client that hangs up mid-stream releases the key. */
  signal: AbortSignal | undefined
}

/** The failure policy of one call: its `storeErrors`, and a record keeping the error's shape. */
export function callFailurePolicy(call: StreamCallInfo): FailurePolicy<TRPCError> {
  return failurePolicy(call.storeErrors, call.logger, {
    serializeError: (error) => recordError(error, call),
  })
}

type OkResult = Extract<MiddlewareResult<object>, { ok: true }>

export type Handover =
  /**
   * A stream handed to tRPC: the lease settles when tRPC has read it (or stopped reading), and
   * `settled` resolves then (never rejects).
   */
  | { kind: 'streaming'; result: MiddlewareResult<object>; settled: Promise<void> }
  /** Nothing streamed: the middleware settles the lease with this result as usual. */
  | { kind: 'settle'; result: MiddlewareResult<object> }

const errorResult = (result: OkResult, error: TRPCError): MiddlewareResult<object> => ({
  marker: result.marker,
  ok: false,
  error,
})

/**
 * What the middleware does with a successful result whose output tRPC streams (an async
 * iterable, promises in it):
 * - on a request tRPC streams (`httpBatchStreamLink`, or a server-side caller), the output is
 *   handed over wrapped, and the lease settles once tRPC has read it whole: completed with what
 *   was read, released on an unexpected failure or when the reader stops early;
 * - on a request tRPC does not stream (`httpLink`, `httpBatchLink`), tRPC answers 415 without
 *   reading the output: the middleware answers that error itself, so the failure policy records
 *   it (a 4xx) and a retry gets the same 415, never a fake success;
 * - in transactional mode the output is refused (the transaction would stay open while a client
 *   reads), and the key released with the handler's writes rolled back.
 */
export function handOverStream(result: OkResult, lease: Lease, call: StreamCallInfo): Handover {
  // On every keyed first execution: most outputs hold nothing streamed, and are told apart
  // without reading the request.
  if (!isDataStream(result.data)) return { kind: 'settle', result }
  const streams = streamsResponse(call.ctx, call.path)
  if (streams === false) return { kind: 'settle', result: errorResult(result, unstreamedRefusal()) }
  if (!isStreamed(result.data)) return { kind: 'settle', result }
  if (lease.tx !== undefined) {
    const refusal = new TRPCError({
      code: 'INTERNAL_SERVER_ERROR',
      message:
        'idempotent-mutations: a mutation run in a database transaction cannot stream its output (the transaction would stay open while the client reads): return the values instead',
    })
    return { kind: 'settle', result: errorResult(result, refusal) }
  }
  let settle!: () => void
  const settled = new Promise<void>((resolve) => {
    settle = resolve
  })
  let data: unknown
  try {
    data = wrap(result.data, lease, call, settle)
  } catch {
    // A member that cannot be read twice (a getter that throws): recorded as it is, which the
    // engine finds unreadable (retries get RESPONSE_NOT_STORED) rather than running it again.
    return { kind: 'settle', result }
  }
  return { kind: 'streaming', result: { ...result, data }, settled }
}

/** The output with its streamed parts wrapped; the lease settles when they have been read. */
function wrap(output: unknown, lease: Lease, call: StreamCallInfo, settled: () => void): unknown {
  return recordStream(output, {
    signal: call.signal,
    recordFailure(error) {
      return recordedFailure(callFailurePolicy(call), getTRPCErrorFromUnknown(error))?.errorData
    },
    end(end) {
      // The engine reports store failures itself (onEvent, logger); nobody is waiting here.
      const settling = end.kind === 'consumed' ? lease.complete(end.recorded) : lease.release()
      settling.catch(() => {}).finally(settled)
    },
  })
}
