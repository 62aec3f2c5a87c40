/**
 * Outcomes as records hold them: encoded by the engine's codec (or not stored, when too large or
 * not serializable), decoded for a replay, and the default form of a recorded error.
 */
import { defaultCodec, encodeReadably, notPlainOk, plainOkValue } from '../codec'
import { ResponseNotStoredError } from '../errors'
import { type EngineContext, type EventBase, emit } from './context'
import type { Outcome } from './types'

/** What `execute` throws when it replays a recorded error that has no adapter-specific form. */
export class ReplayedError extends Error {
  override name = 'ReplayedError'
  readonly code: unknown
  readonly status: unknown
  constructor(data: { name?: unknown; message?: unknown; code?: unknown; status?: unknown }) {
    super(typeof data.message === 'string' ? data.message : 'Recorded error')
    if (typeof data.name === 'string') this.name = data.name
    this.code = data.code
    this.status = data.status
  }
}

export function defaultSerializeError(error: unknown): unknown {
  const e = (error ?? {}) as { name?: unknown; message?: unknown; code?: unknown; status?: unknown }
  return { name: e.name, message: e.message, code: e.code, status: e.status }
}

export function defaultDeserializeError(data: unknown): unknown {
  return new ReplayedError((data ?? {}) as Record<string, unknown>)
}

/** The outcome as stored text, or null when it cannot be stored (too large, not serializable). */
export function encodeOutcome(
  context: EngineContext<unknown>,
  outcome: Outcome,
  base: EventBase,
): string | null {
  const { maxResponseBytes } = context
  let response: string | null
  try {
    response = encodeReadably(context.codec, outcome)
  } catch (error) {
    emit(context, base, 'not-stored', { error })
    context.logger.warn(
      `the response of operation ${base.operation} is not serializable (it would not read back as it was); its retries get RESPONSE_NOT_STORED`,
      error,
    )
    return null
  }
  // A UTF-16 code unit is at most 3 UTF-8 bytes: most responses need no byte count at all.
  if (response.length * 3 > maxResponseBytes && Buffer.byteLength(response) > maxResponseBytes) {
    emit(context, base, 'not-stored', { error: new Error('response exceeds maxResponseBytes') })
    return null
  }
  return response
}

/**
 * A recorded outcome, as the codec wrote it. A record that does not decode (written by an older
 * version, or by a codec that cannot read its own text) answers as not stored: the operation
 * ran, and a retry must hear that, not a 500 nor a second execution.
 */
export function decodeOutcome(
  context: EngineContext<unknown>,
  text: string,
  base: EventBase,
): Outcome {
  const { codec } = context
  if (codec === defaultCodec) {
    const value = plainOkValue(text)
    if (value !== notPlainOk) return { ok: true, value }
  }
  let outcome: Outcome
  try {
    outcome = codec.decode(text) as Outcome
  } catch (error) {
    return unreadable(context, base, error)
  }
  if (outcome === null || typeof outcome !== 'object' || typeof outcome.ok !== 'boolean') {
    return unreadable(context, base, new TypeError('the record does not hold an outcome'))
  }
  return outcome
}

function unreadable(context: EngineContext<unknown>, base: EventBase, error: unknown): never {
  emit(context, base, 'not-stored', { error, code: 'RESPONSE_NOT_STORED' })
  context.logger.error(
    `the record of operation ${base.operation} cannot be read back; its retries get RESPONSE_NOT_STORED`,
    error,
  )
  throw new ResponseNotStoredError({ cause: error })
}
