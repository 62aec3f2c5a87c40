/**
 * Every error the engine raises on purpose. Adapters map `code` and `status` onto their host's
 * idiom (TRPCError codes, GraphQL `extensions`); the core never builds transport errors.
 */
export type IdempotencyErrorCode =
  | 'KEY_REQUIRED'
  | 'KEY_INVALID'
  | 'KEY_REUSED'
  | 'IN_PROGRESS'
  | 'STORE_UNAVAILABLE'
  | 'OUTCOME_UNKNOWN'
  | 'RESPONSE_NOT_STORED'

/** The HTTP status each code maps to (SPEC: "Public API"). */
export const idempotencyErrorStatus: Readonly<Record<IdempotencyErrorCode, number>> = {
  KEY_REQUIRED: 400,
  KEY_INVALID: 400,
  KEY_REUSED: 422,
  IN_PROGRESS: 409,
  STORE_UNAVAILABLE: 503,
  OUTCOME_UNKNOWN: 503,
  RESPONSE_NOT_STORED: 422,
}

export interface IdempotencyErrorOptions {
  cause?: unknown | undefined
}

export class IdempotencyError extends Error {
  override name = 'IdempotencyError'
  readonly code: IdempotencyErrorCode
  readonly status: number
  /** Seconds the client should wait before retrying; set for `IN_PROGRESS` and `OUTCOME_UNKNOWN`. */
  readonly retryAfter: number | undefined

  constructor(
    code: IdempotencyErrorCode,
    message: string,
    options: IdempotencyErrorOptions & { retryAfter?: number | undefined } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause })
    this.code = code
    this.status = idempotencyErrorStatus[code]
    this.retryAfter = options.retryAfter
  }
}

export class KeyRequiredError extends IdempotencyError {
  override name = 'KeyRequiredError'
  constructor(options: IdempotencyErrorOptions = {}) {
    super(
      'KEY_REQUIRED',
      'This mutation requires an Idempotency-Key: send one header (or input key) per logical operation and reuse it on every retry.',
      options,
    )
  }
}

export class KeyInvalidError extends IdempotencyError {
  override name = 'KeyInvalidError'
  constructor(reason: string, options: IdempotencyErrorOptions = {}) {
    super(
      'KEY_INVALID',
      `Invalid Idempotency-Key: ${reason}. A key is 1-255 visible ASCII characters (0x21-0x7E), sent once per operation.`,
      options,
    )
  }
}

export class KeyReusedError extends IdempotencyError {
  override name = 'KeyReusedError'
  constructor(options: IdempotencyErrorOptions = {}) {
    super(
      'KEY_REUSED',
      'This Idempotency-Key was already used with a different request payload: use a new key for a new operation.',
      options,
    )
  }
}

export class InProgressError extends IdempotencyError {
  override name = 'InProgressError'
  constructor(retryAfter: number, options: IdempotencyErrorOptions = {}) {
    super(
      'IN_PROGRESS',
      `A request with this Idempotency-Key is still being processed: retry after ${retryAfter} s with the same key.`,
      { ...options, retryAfter },
    )
  }
}

export class StoreUnavailableError extends IdempotencyError {
  override name = 'StoreUnavailableError'
  constructor(options: IdempotencyErrorOptions = {}) {
    super(
      'STORE_UNAVAILABLE',
      'The idempotency store is unavailable, so the request was not run: retry later with the same key.',
      options,
    )
  }
}

/**
 * The operation ran, but whether its outcome took effect is unknown: the database's answer to
 * the COMMIT was lost (its connection reset) or did not come within `commitTimeout`. Unlike
 * `STORE_UNAVAILABLE`, it may have been applied; a retry with the same key learns which (the
 * replay, or a first execution).
 */
export class OutcomeUnknownError extends IdempotencyError {
  override name = 'OutcomeUnknownError'
  constructor(retryAfter = 1, options: IdempotencyErrorOptions = {}) {
    super(
      'OUTCOME_UNKNOWN',
      'The request with this Idempotency-Key ran, but the idempotency store did not confirm its outcome: it may have been applied; retry with the same key to learn its outcome.',
      { ...options, retryAfter },
    )
  }
}

export class ResponseNotStoredError extends IdempotencyError {
  override name = 'ResponseNotStoredError'
  constructor(options: IdempotencyErrorOptions = {}) {
    super(
      'RESPONSE_NOT_STORED',
      'The request with this Idempotency-Key already ran, but its response could not be stored (too large or not serializable), so it cannot be replayed. It will not run again.',
      options,
    )
  }
}

export function isIdempotencyError(error: unknown): error is IdempotencyError {
  return error instanceof IdempotencyError
}
