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
import type { Meter, Tracer } from '@opentelemetry/api'
import { loadOpenTelemetry, type OpenTelemetryApi } from './api'
import { durationBuckets, instrumentationName, metricNames } from './names'
import { storeKind, type TelemetryOptions } from './options'
import { type Instruments, OperationTrace, quietly } from './trace'

/** A provider of the API's global registry: a proxy whose delegate is the registered SDK's. */
interface ProxyProvider {
  getDelegate(): object
  getDelegateTracer(name: string, version?: string): Tracer | undefined
}

const isProxy = (provider: object): provider is ProxyProvider =>
  typeof (provider as Partial<ProxyProvider>).getDelegateTracer === 'function'

/**
 * Where the API (every 1.x copy of it) keeps what an SDK registers. Absent until something
 * registers: then no SDK is there, and a keyed call need not ask the API (two lookups of its
 * global providers, each checking the registry's version) to learn it.
 */
const registryKey = Symbol.for('opentelemetry.js.api.1')
const registry = globalThis as { [registryKey]?: unknown }

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
