/**
 * The trace of one keyed operation (see ./telemetry.ts for how an engine makes one): its span,
 * the store calls as child spans, and the metrics recorded when it ends.
 */
import type { Attributes, Context, Counter, Histogram, Span, Tracer } from '@opentelemetry/api'
import type { EventDetails } from '../engine/context'
import type { Attempt, IdempotencyEventType } from '../engine/types'
import { isIdempotencyError } from '../errors'
import type { OpenTelemetryApi } from './api'
import { attributeNames, type TelemetryOutcome } from './names'

/** What an operation's trace needs of its engine's telemetry (./telemetry.ts). */
export interface TraceSettings {
  readonly api: OpenTelemetryApi
  /** The store's name, for `idempotency.store`. */
  readonly store: string
  readonly recordKeys: boolean
}

export interface Instruments {
  operations: Counter
  claimDuration: Histogram
  completeDuration: Histogram
  waitDuration: Histogram
}

/** The engine events that say how an operation ended, as `idempotency.outcome` values. */
const outcomes: Partial<Record<IdempotencyEventType, TelemetryOutcome>> = {
  executed: 'executed',
  replayed: 'replayed',
  conflict: 'conflict',
  mismatch: 'mismatch',
  released: 'released',
  'lost-lease': 'lost_lease',
  'store-error': 'store_error',
  'not-stored': 'not_stored',
  'outcome-unknown': 'outcome_unknown',
}

/** The outcome of an operation whose claim threw before any event said how it ended. */
const outcomesOfCodes: Record<string, TelemetryOutcome> = {
  IN_PROGRESS: 'conflict',
  KEY_REUSED: 'mismatch',
  STORE_UNAVAILABLE: 'store_error',
  RESPONSE_NOT_STORED: 'not_stored',
  OUTCOME_UNKNOWN: 'outcome_unknown',
}

/** The outcomes a span reports as an error: the library (or its store) failed. */
const failures = new Set<TelemetryOutcome>(['store_error', 'outcome_unknown', 'error'])

/** The operation trace of each lease an `execute` runs its handler under. */
const leaseTraces = new WeakMap<object, OperationTrace>()

/**
 * The trace of one keyed operation: its span (when traces are recorded), what the engine's
 * events said of it, and its metrics, recorded when it ends. Ends once; later events (a
 * completion that lands in the background) are not part of it.
 */
export class OperationTrace {
  readonly #telemetry: TraceSettings
  readonly #tracer: Tracer | undefined
  readonly #instruments: Instruments | undefined
  readonly #span: Span | undefined
  /** The span the handler runs under: {@link #span}, or one the sampler dropped. */
  readonly #active: Span | undefined
  /** The attributes every metric of the operation carries. */
  readonly #attributes: Attributes
  #outcome: TelemetryOutcome | undefined
  #error: unknown
  #takeover = false
  #waitStartedAt: number | undefined
  #waitSeconds: number | undefined
  #ended = false

  constructor(
    telemetry: TraceSettings,
    tracer: Tracer | undefined,
    instruments: Instruments | undefined,
    operation: string,
    key: string,
    adapter: string | undefined,
  ) {
    this.#telemetry = telemetry
    this.#instruments = instruments
    const attributes: Attributes = {
      [attributeNames.operation]: operation,
      [attributeNames.store]: telemetry.store,
    }
    if (adapter !== undefined) attributes[attributeNames.adapter] = adapter
    this.#attributes = attributes
    const span = tracer?.startSpan(`idempotency ${operation}`, {
      kind: telemetry.api.SpanKind.INTERNAL,
      attributes: telemetry.recordKeys ? { ...attributes, [attributeNames.key]: key } : attributes,
    })
    // A span the sampler dropped records nothing, and neither would its children; it is still
    // the handler's parent, so that the handler's spans follow its sampling decision.
    this.#active = span
    if (span?.isRecording()) {
      this.#span = span
      this.#tracer = tracer
    }
  }

  /** An engine event of this operation (see `emit`): the first that says how it ended counts. */
  event(type: IdempotencyEventType, details: EventDetails | undefined): void {
    if (this.#ended) return
    if (type === 'takeover') this.#takeover = true
    const outcome = outcomes[type]
    if (outcome === undefined || this.#outcome !== undefined) return
    this.#outcome = outcome
    this.#error = details?.error
  }

  /** A duplicate starts waiting for the in-flight operation (`concurrency: 'wait'`). */
  waiting(): void {
    this.#waitStartedAt ??= performance.now()
  }

  /**
   * The claim path's answer: the operation ends here unless this caller got the lease, and
   * then ends when the lease is settled (`settled`).
   */
  claimed<TTransaction>(claiming: Promise<Attempt<TTransaction>>): Promise<Attempt<TTransaction>> {
    return claiming.then(
      (attempt) => {
        this.#stopWaiting()
        if (attempt.kind === 'execute') leaseTraces.set(attempt.lease, this)
        else this.end(undefined)
        return attempt
      },
      (error: unknown) => {
        this.#stopWaiting()
        this.end(error)
        throw error
      },
    )
  }

  /** The operation ends when settling its lease does. */
  settled(settling: Promise<void>): Promise<void> {
    settling.then(
      () => this.end(undefined),
      (error: unknown) => this.end(error),
    )
    return settling
  }

  /** A claim of the store; `failure` reads a failure the claim answers with instead of throwing. */
  claim<T>(call: () => Promise<T>, failure?: (result: T) => unknown): Promise<T> {
    return this.#storeCall('claim', this.#instruments?.claimDuration, call, failure)
  }

  /** One attempt to record the outcome. */
  complete<T>(call: () => Promise<T>): Promise<T> {
    return this.#storeCall('complete', this.#instruments?.completeDuration, call)
  }

  /** Releasing the key. */
  release<T>(call: () => Promise<T>): Promise<T> {
    return this.#storeCall('release', undefined, call)
  }

  /** Runs `fn` with the operation's span active: the spans it starts are its children. */
  run<T>(fn: () => T): T {
    const span = this.#active
    if (span === undefined) return fn()
    const { context, trace } = this.#telemetry.api
    return context.with(trace.setSpan(context.active(), span), fn)
  }

  /** Ends the operation: its span gets its outcome, and the metrics count it. */
  end(error: unknown): void {
    if (this.#ended) return
    this.#ended = true
    quietly(() => this.#record(error))
  }

  #record(error: unknown): void {
    const outcome = this.#outcome ?? outcomeOf(error)
    const failed = failures.has(outcome)
    const attributes: Attributes = { ...this.#attributes, [attributeNames.outcome]: outcome }
    if (this.#takeover) attributes[attributeNames.takeover] = true
    if (failed) attributes[attributeNames.errorType] = errorType(this.#error ?? error)
    const waited = this.#waitSeconds
    if (this.#instruments) {
      this.#instruments.operations.add(1, attributes)
      if (waited !== undefined) this.#instruments.waitDuration.record(waited, attributes)
    }
    const span = this.#span
    if (span === undefined) return
    span.setAttributes(attributes)
    if (waited !== undefined) span.setAttribute(attributeNames.waitDuration, waited)
    // No message: error messages can quote the data (and keys) that caused them.
    if (failed) span.setStatus({ code: this.#telemetry.api.SpanStatusCode.ERROR })
    span.end()
  }

  #stopWaiting(): void {
    if (this.#waitStartedAt !== undefined) {
      this.#waitSeconds = (performance.now() - this.#waitStartedAt) / 1000
    }
  }

  /**
   * A store call, as a child span (the database driver's own spans nest under it) and a
   * duration. A call that throws, or answers with a `failure`, is marked with `error.type`.
   */
  #storeCall<T>(
    name: 'claim' | 'complete' | 'release',
    histogram: Histogram | undefined,
    call: () => Promise<T>,
    failure?: (result: T) => unknown,
  ): Promise<T> {
    const startedAt = performance.now()
    const span = quietly(() => this.#childSpan(name))
    const { context, trace, SpanStatusCode } = this.#telemetry.api
    const calling = span ? context.with(trace.setSpan(context.active(), span), call) : call()
    const finish = (error: unknown) => {
      const attributes: Attributes = { ...this.#attributes }
      if (error !== undefined) attributes[attributeNames.errorType] = errorType(error)
      histogram?.record((performance.now() - startedAt) / 1000, attributes)
      if (span === undefined) return
      if (error !== undefined) {
        span.setAttribute(attributeNames.errorType, attributes[attributeNames.errorType] as string)
        span.setStatus({ code: SpanStatusCode.ERROR })
      }
      span.end()
    }
    calling.then(
      (result) => quietly(() => finish(failure?.(result))),
      (error: unknown) => quietly(() => finish(error ?? 'unknown')),
    )
    return calling
  }

  #childSpan(name: string): Span | undefined {
    const parent = this.#span
    if (parent === undefined || this.#tracer === undefined) return undefined
    const { context, trace, SpanKind } = this.#telemetry.api
    const parentContext: Context = trace.setSpan(context.active(), parent)
    return this.#tracer.startSpan(
      `idempotency ${name}`,
      { kind: SpanKind.INTERNAL, attributes: { [attributeNames.store]: this.#telemetry.store } },
      parentContext,
    )
  }
}

/**
 * Runs an `execute` handler under its lease's operation span, so that the handler's own spans
 * (a payment provider's HTTP call) are the operation's children.
 */
export function runUnderOperation<T>(lease: object, fn: () => T): T {
  const trace = leaseTraces.get(lease)
  return trace === undefined ? fn() : trace.run(fn)
}

function outcomeOf(error: unknown): TelemetryOutcome {
  if (error === undefined) return 'executed'
  return (isIdempotencyError(error) && outcomesOfCodes[error.code]) || 'error'
}

/**
 * `error.type`: a short, low-cardinality name of what failed: a driver's error code
 * (`ECONNREFUSED`, a SQLSTATE), the library's error code, else the error's class name.
 */
function errorType(error: unknown): string {
  if (error !== null && typeof error === 'object') {
    const { code, name } = error as { code?: unknown; name?: unknown }
    if (typeof code === 'string' && code !== '') return code
    if (typeof name === 'string' && name !== '') return name
  }
  return '_OTHER'
}

/** Telemetry never fails a request: what an SDK (or a provider passed in) throws is dropped. */
export function quietly<T>(fn: () => T): T | undefined {
  try {
    return fn()
  } catch {
    return undefined
  }
}
