/**
 * OpenTelemetry traces and metrics of keyed operations. The engine hands each keyed operation an
 * {@link OperationTrace} (when an SDK is there to record it), reports its events to it where it
 * reports them to `onEvent`, and wraps its store calls in it:
 *
 *   idempotency <operation>      one span from the claim to the recorded outcome
 *     ├─ idempotency claim       each claim of the store (a waiting duplicate claims again)
 *     ├─ idempotency complete    each attempt to record the outcome
 *     └─ idempotency release     releasing the key after an unexpected error
 *
 * Without an SDK (nothing registered with the API) no trace is made: what remains on a keyed
 * call is one read of the API's global registry.
 */
import type {
  Attributes,
  Context,
  Counter,
  Histogram,
  Meter,
  Span,
  Tracer,
} from '@opentelemetry/api'
import type { EventDetails } from '../engine/context'
import type { Attempt, IdempotencyEventType } from '../engine/types'
import { isIdempotencyError } from '../errors'
import { loadOpenTelemetry, type OpenTelemetryApi } from './api'
import {
  attributeNames,
  durationBuckets,
  instrumentationName,
  metricNames,
  type TelemetryOutcome,
} from './names'
import { storeKind, type TelemetryOptions } from './options'

interface Instruments {
  operations: Counter
  claimDuration: Histogram
  completeDuration: Histogram
  waitDuration: Histogram
}

/** A provider of the API's global registry: a proxy whose delegate is the registered SDK's. */
interface ProxyProvider {
  getDelegate(): object
  getDelegateTracer(name: string, version?: string): Tracer | undefined
}

const isProxy = (provider: object): provider is ProxyProvider =>
  typeof (provider as Partial<ProxyProvider>).getDelegateTracer === 'function'

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

/**
 * Where the API (every 1.x copy of it) keeps what an SDK registers. Absent until something
 * registers: then no SDK is there, and a keyed call need not ask the API (two lookups of its
 * global providers, each checking the registry's version) to learn it.
 */
const registryKey = Symbol.for('opentelemetry.js.api.1')
const registry = globalThis as { [registryKey]?: unknown }

/** The operation trace of each lease an `execute` runs its handler under. */
const leaseTraces = new WeakMap<object, OperationTrace>()

/**
 * The telemetry of an engine over `store`, or undefined when it is turned off (`false`) or the
 * OpenTelemetry API is not installed.
 */
export function createTelemetry(
  options: TelemetryOptions | false,
  store: object,
): Telemetry | undefined {
  if (options === false) return undefined
  if (options === null || typeof options !== 'object') {
    throw new TypeError(
      'idempotent-mutations: createIdempotency `telemetry` must be an object of telemetry options or false',
    )
  }
  const api = loadOpenTelemetry()
  return api === undefined ? undefined : new Telemetry(api, options, storeKind(store))
}

/** One engine's telemetry: its providers, the store's name, and the instruments. */
export class Telemetry {
  readonly api: OpenTelemetryApi
  readonly store: string
  readonly recordKeys: boolean
  readonly #version: string | undefined
  readonly #tracerProvider: object | undefined
  readonly #meterProvider: object | undefined
  /** True when both providers are the global ones. */
  readonly #global: boolean
  // What the current tracer and instruments were made from: a provider registered (or
  // replaced) after the engine was created is picked up at the next operation.
  #tracerSource: object | undefined
  #tracer: Tracer | undefined
  #meterSource: object | undefined
  #instruments: Instruments | undefined

  constructor(api: OpenTelemetryApi, options: TelemetryOptions, store: string, version?: string) {
    this.api = api
    this.store = options.store ?? store
    this.recordKeys = options.recordKeys === true
    this.#version = version
    this.#tracerProvider = options.tracerProvider as object | undefined
    this.#meterProvider = options.meterProvider as object | undefined
    this.#global = this.#tracerProvider === undefined && this.#meterProvider === undefined
  }

  /** A trace for a keyed operation, or undefined when no SDK would record any of it. */
  start(operation: string, key: string, adapter: string | undefined): OperationTrace | undefined {
    return quietly(() => this.#start(operation, key, adapter))
  }

  #start(operation: string, key: string, adapter: string | undefined): OperationTrace | undefined {
    if (this.#global && registry[registryKey] === undefined) return undefined
    const tracer = this.tracer()
    const instruments = this.instruments()
    if (tracer === undefined && instruments === undefined) return undefined
    return new OperationTrace(this, tracer, instruments, operation, key, adapter)
  }

  /** The tracer to use now; undefined while the global provider has no SDK behind it. */
  tracer(): Tracer | undefined {
    const provider = this.#tracerProvider ?? this.api.trace.getTracerProvider()
    const source = isProxy(provider) ? provider.getDelegate() : provider
    if (source !== this.#tracerSource) {
      this.#tracerSource = source
      this.#tracer = isProxy(provider)
        ? provider.getDelegateTracer(instrumentationName, this.#version)
        : (provider as { getTracer(name: string, version?: string): Tracer }).getTracer(
            instrumentationName,
            this.#version,
          )
    }
    return this.#tracer
  }

  /** The instruments to record with now; undefined while the meter is a no-op. */
  instruments(): Instruments | undefined {
    const provider = this.#meterProvider ?? this.api.metrics.getMeterProvider()
    if (provider !== this.#meterSource) {
      this.#meterSource = provider
      const meter = (provider as { getMeter(name: string, version?: string): Meter }).getMeter(
        instrumentationName,
        this.#version,
      )
      this.#instruments = meter === this.api.createNoopMeter() ? undefined : instrumentsOf(meter)
    }
    return this.#instruments
  }
}

function instrumentsOf(meter: Meter): Instruments {
  const duration = (name: string, description: string) =>
    meter.createHistogram(name, {
      description,
      unit: 's',
      advice: { explicitBucketBoundaries: durationBuckets },
    })
  return {
    operations: meter.createCounter(metricNames.operations, {
      description: 'Keyed operations, by how they ended',
      unit: '{operation}',
    }),
    claimDuration: duration(metricNames.claimDuration, 'How long claiming a key in the store took'),
    completeDuration: duration(
      metricNames.completeDuration,
      'How long recording an outcome in the store took, per attempt',
    ),
    waitDuration: duration(
      metricNames.waitDuration,
      "How long a duplicate waited for the in-flight operation (concurrency: 'wait')",
    ),
  }
}

/**
 * The trace of one keyed operation: its span (when traces are recorded), what the engine's
 * events said of it, and its metrics, recorded when it ends. Ends once; later events (a
 * completion that lands in the background) are not part of it.
 */
export class OperationTrace {
  readonly #telemetry: Telemetry
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
    telemetry: Telemetry,
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
function quietly<T>(fn: () => T): T | undefined {
  try {
    return fn()
  } catch {
    return undefined
  }
}
