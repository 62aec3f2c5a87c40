import {
  type ExecutionResult,
  type FormattedExecutionResult,
  GraphQLError,
  Source,
  type SourceLocation,
} from 'graphql'
import type { IdempotencyError } from '../../src'
import { isDeterministicStatus } from '../kit'

/** The `extensions.code` prefix of the plugin's own errors: `IDEMPOTENCY_KEY_REQUIRED`, … */
const codePrefix = 'IDEMPOTENCY_'

/**
 * An engine error as the GraphQL error a client gets. `extensions.http` makes Yoga answer with
 * the status (400, 409, 422, 503) and, on 409 and 503 `OUTCOME_UNKNOWN`, a `Retry-After` header; Yoga strips `http` from
 * the body, so `retryAfter` is repeated as an extension for clients that only see the body.
 * No `originalError`: an error that wraps a non-GraphQL error is what maskers mask.
 */
export function toGraphQLError(error: IdempotencyError): GraphQLError {
  const retry = error.retryAfter === undefined ? {} : { retryAfter: error.retryAfter }
  return new GraphQLError(error.message, {
    extensions: {
      code: `${codePrefix}${error.code}`,
      ...retry,
      http: {
        status: error.status,
        ...(error.retryAfter === undefined
          ? {}
          : { headers: { 'Retry-After': String(error.retryAfter) } }),
      },
    },
  })
}

/** A result that holds one error and no `data`: nothing ran. */
export function errorResult(error: GraphQLError): ExecutionResult {
  return { errors: [error] }
}

/**
 * True for a GraphQLError thrown on purpose: its `originalError` chain holds only GraphQL
 * errors. Compared by name, as Envelop does, so two copies of `graphql` agree.
 */
export function isOriginalGraphQLError(error: unknown): boolean {
  if (!(error instanceof Error) || error.name !== 'GraphQLError') return false
  const { originalError } = error as { originalError?: unknown }
  return originalError == null ? true : isOriginalGraphQLError(originalError)
}

/**
 * The default for `storeErrors`: an error is deterministic, and recorded, when it is a
 * GraphQLError thrown on purpose (not one wrapping an unexpected exception, not marked
 * `unexpected` by a masker) whose `extensions.http.status`, if it has a failure status, is one
 * for which {@link isDeterministicStatus} holds (not a 5xx, 408, 409 or 429: those say "try
 * again"). Anything else releases the key.
 */
export function defaultStoreGraphQLErrors(error: GraphQLError): boolean {
  if (!isOriginalGraphQLError(error)) return false
  const extensions = (error.extensions ?? {}) as {
    unexpected?: unknown | undefined
    http?: { status?: unknown } | undefined
  }
  if (extensions.unexpected === true) return false
  const status = extensions.http?.status
  return typeof status !== 'number' || status < 400 || isDeterministicStatus(status)
}

/**
 * Refuses keyed `@defer`/`@stream` mutations: the client gets an incremental stream, not one
 * result, and a replay could not be delivered the same way.
 */
export function incrementalRefusal(transactional: boolean): GraphQLError {
  return new GraphQLError(
    transactional
      ? 'A mutation run in a database transaction cannot use @defer or @stream (the transaction would stay open across the stream): remove them.'
      : 'A mutation sent with an Idempotency-Key cannot use @defer or @stream: remove them, or send it without a key.',
    { extensions: { code: 'IDEMPOTENCY_INCREMENTAL_DELIVERY_UNSUPPORTED', http: { status: 400 } } },
  )
}

/** An error of a recorded result: its JSON form plus what Yoga needs to pick the status. */
interface RecordedError {
  message: string
  locations?: SourceLocation[] | undefined
  path?: ReadonlyArray<string | number> | undefined
  /** Kept whole, `http` and `unexpected` included: Yoga derives the HTTP status from them. */
  extensions?: Record<string, unknown> | undefined
  /** The error wrapped a non-GraphQL error (possible only when masking is off). */
  unexpectedOrigin?: true | undefined
}

/**
 * What the plugin stores: the execution result as the client got it, keys in order, and the
 * HTTP status a host answered it with when the result itself does not carry it (Apollo Server
 * takes `extensions.http` out of its errors before the result is recorded).
 */
export interface RecordedResult {
  graphqlResult: Record<string, unknown>
  status?: number | undefined
}

export function isRecordedResult(value: unknown): value is RecordedResult {
  const inner = (value as Partial<RecordedResult> | null)?.graphqlResult
  return inner !== null && typeof inner === 'object'
}

/**
 * The result in codec-friendly form. Errors become their JSON form (message, locations, path,
 * extensions), which is what the client received; an error already in that form (Apollo's,
 * after `formatError`) is kept whole. Functions (a custom `stringify`) and undefined fields are
 * dropped. `status`: the HTTP status the result was answered with, if the host took it out of
 * the errors (a 200 is not kept).
 */
export function recordResult(
  result: ExecutionResult | FormattedExecutionResult,
  status?: number,
): RecordedResult {
  const graphqlResult: Record<string, unknown> = {}
  for (const [name, value] of Object.entries(result)) {
    if (typeof value === 'function' || value === undefined) continue
    graphqlResult[name] = name === 'errors' && Array.isArray(value) ? value.map(recordError) : value
  }
  return status === undefined || status === 200 ? { graphqlResult } : { graphqlResult, status }
}

function recordError(error: unknown): RecordedError {
  if (isFormattedError(error)) return { ...error }
  const json = (
    error !== null &&
    typeof error === 'object' &&
    typeof (error as GraphQLError).toJSON === 'function'
      ? (error as GraphQLError).toJSON()
      : { message: String((error as { message?: unknown })?.message ?? error) }
  ) as {
    message: string
    locations?: SourceLocation[] | undefined
    path?: (string | number)[] | undefined
    extensions?: Record<string, unknown> | undefined
  }
  const recorded: RecordedError = { message: json.message }
  if (json.locations) recorded.locations = json.locations
  if (json.path) recorded.path = json.path
  if (json.extensions && Object.keys(json.extensions).length > 0) {
    recorded.extensions = json.extensions
  }
  if (error instanceof Error && error.name === 'GraphQLError' && !isOriginalGraphQLError(error)) {
    recorded.unexpectedOrigin = true
  }
  return recorded
}

/** An error in the form a client receives it: a plain object with a `message`, no class. */
function isFormattedError(error: unknown): error is RecordedError {
  return (
    error !== null &&
    typeof error === 'object' &&
    !(error instanceof Error) &&
    typeof (error as { message?: unknown }).message === 'string'
  )
}

/**
 * The recorded result as Yoga (or Envelop) gets it on a replay. Errors are rebuilt as
 * GraphQLErrors so Yoga serializes them exactly as the first time (stripping `http` and
 * `unexpected` from the body) and derives the same HTTP status from the same extensions.
 */
export function replayResult(recorded: RecordedResult): ExecutionResult {
  const result: Record<string, unknown> = {}
  for (const [name, value] of Object.entries(recorded.graphqlResult)) {
    result[name] =
      name === 'errors' && Array.isArray(value)
        ? (value as RecordedError[]).map(rebuildError)
        : value
  }
  return result as ExecutionResult
}

function rebuildError(recorded: RecordedError): GraphQLError {
  return new GraphQLError(recorded.message, {
    ...locationsAsPositions(recorded.locations),
    path: recorded.path,
    extensions: recorded.extensions,
    originalError: recorded.unexpectedOrigin ? new Error(recorded.message) : undefined,
  })
}

/**
 * GraphQLError derives `locations` from a source and offsets, and Yoga rebuilds every error
 * from those when it serializes, so a replay cannot set `locations` directly. This builds the
 * smallest source whose offsets map to the recorded lines and columns. The replay's own
 * document may be formatted differently, so its offsets would give other locations.
 */
function locationsAsPositions(locations: readonly SourceLocation[] | undefined): {
  source?: Source | undefined
  positions?: number[] | undefined
} {
  if (!locations?.length) return {}
  const valid = locations.every(
    (l) => Number.isInteger(l.line) && l.line > 0 && Number.isInteger(l.column) && l.column > 0,
  )
  if (!valid) return {}
  const widths: number[] = []
  for (const { line, column } of locations) {
    widths[line - 1] = Math.max(widths[line - 1] ?? 0, column)
  }
  const lines = Array.from(widths, (width) => ' '.repeat(width ?? 0))
  const starts: number[] = []
  let offset = 0
  for (const line of lines) {
    starts.push(offset)
    offset += line.length + 1
  }
  return {
    source: new Source(lines.join('\n')),
    positions: locations.map(({ line, column }) => starts[line - 1]! + column - 1),
  }
}
