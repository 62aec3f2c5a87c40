/**
 * The names the library records under, in OpenTelemetry's style: lowercase, dot-separated,
 * durations in seconds. docs/observability.md lists them; test/telemetry holds it to this file.
 */

/** The instrumentation scope: the tracer's and the meter's name. */
export const instrumentationName = 'idempotent-mutations'

/** Span and metric attributes. */
export const attributeNames = {
  /** The operation: a tRPC path, a GraphQL mutation's root fields, a method and path. */
  operation: 'idempotency.operation',
  /** How the operation ended (see {@link TelemetryOutcome}). */
  outcome: 'idempotency.outcome',
  /** The adapter that asked: trpc, envelop, yoga, apollo, fetch, hono, express. */
  adapter: 'idempotency.adapter',
  /** The store: memory, postgresql, mysql, sqlite, redis, or custom. */
  store: 'idempotency.store',
  /** True when the execution took over a lease whose executor died. */
  takeover: 'idempotency.takeover',
  /** How long a duplicate waited for the in-flight operation (`concurrency: 'wait'`), in seconds. */
  waitDuration: 'idempotency.wait.duration',
  /** The client's key; only with `telemetry: { recordKeys: true }`. */
  key: 'idempotency.key',
  /** What failed, on a failed store call or an operation that ended in a store error. */
  errorType: 'error.type',
} as const

/** Metric instruments. */
export const metricNames = {
  /** Counter, `{operation}`: keyed operations by outcome. */
  operations: 'idempotency.operations',
  /** Histogram, seconds: the store's claims. */
  claimDuration: 'idempotency.claim.duration',
  /** Histogram, seconds: recording outcomes (each attempt). */
  completeDuration: 'idempotency.complete.duration',
  /** Histogram, seconds: duplicates waiting with `concurrency: 'wait'`. */
  waitDuration: 'idempotency.wait.duration',
} as const

/** How a keyed operation ended: the engine event that settled it, in snake case. */
export type TelemetryOutcome =
  | 'executed'
  | 'replayed'
  | 'conflict'
  | 'mismatch'
  | 'released'
  | 'lost_lease'
  | 'store_error'
  | 'not_stored'
  | 'outcome_unknown'
  /** Something the library did not expect threw (worth a bug report). */
  | 'error'

/**
 * Bucket boundaries for the duration histograms, in seconds: claims and completions take
 * milliseconds, waits up to `waitTimeout` (10 s by default).
 */
export const durationBuckets = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
]
