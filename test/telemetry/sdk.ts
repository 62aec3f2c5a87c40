/**
 * The OpenTelemetry SDK as an application registers it, recording into memory: a tracer
 * provider with an in-memory span exporter, a meter provider with a reader the tests collect
 * from, and the async-hooks context manager (parent spans across awaits).
 */
import { context, metrics, trace } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import {
  type DataPoint,
  type Histogram,
  MeterProvider,
  MetricReader,
} from '@opentelemetry/sdk-metrics'
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base'

/** A reader that exports nothing by itself: the tests call `collect()`. */
class CollectingReader extends MetricReader {
  protected async onShutdown(): Promise<void> {}
  protected async onForceFlush(): Promise<void> {}
}

export interface RecordingSdk {
  tracerProvider: BasicTracerProvider
  meterProvider: MeterProvider
  /** The spans ended so far. */
  spans(): ReadableSpan[]
  /** The data points of the metric `name`, as collected now. */
  points(name: string): Promise<DataPoint<number | Histogram>[]>
  /** The unit of the metric `name`. */
  unit(name: string): Promise<string | undefined>
  /** Forgets the spans recorded so far (metrics are cumulative: compare before and after). */
  reset(): void
  shutdown(): Promise<void>
}

/** An SDK recording into memory; `register` makes its providers the global ones. */
export function createRecordingSdk({ register }: { register: boolean }): RecordingSdk {
  const exporter = new InMemorySpanExporter()
  const tracerProvider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  })
  const reader = new CollectingReader()
  const meterProvider = new MeterProvider({ readers: [reader] })
  const contextManager = new AsyncLocalStorageContextManager().enable()
  if (register) {
    trace.setGlobalTracerProvider(tracerProvider)
    metrics.setGlobalMeterProvider(meterProvider)
    context.setGlobalContextManager(contextManager)
  }
  const metric = async (name: string) => {
    const { resourceMetrics } = await reader.collect()
    return resourceMetrics.scopeMetrics
      .flatMap((scope) => scope.metrics)
      .find((found) => found.descriptor.name === name)
  }
  return {
    tracerProvider,
    meterProvider,
    spans: () => exporter.getFinishedSpans(),
    points: async (name) =>
      ((await metric(name))?.dataPoints ?? []) as DataPoint<number | Histogram>[],
    unit: async (name) => (await metric(name))?.descriptor.unit,
    reset: () => exporter.reset(),
    async shutdown() {
      if (register) {
        trace.disable()
        metrics.disable()
        context.disable()
      }
      contextManager.disable()
      await Promise.all([tracerProvider.shutdown(), meterProvider.shutdown()])
    },
  }
}

/** The span's parent's id, or undefined for a root span. */
export const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId

/** The spans of keyed operations (not the store calls under them). */
export const operationSpans = (spans: ReadableSpan[]) =>
  spans.filter((span) => span.attributes['idempotency.outcome'] !== undefined)

/** The count a counter holds for the data point whose attributes include `attributes`. */
export function countOf(
  points: DataPoint<number | Histogram>[],
  attributes: Record<string, unknown>,
): number {
  return points
    .filter((point) =>
      Object.entries(attributes).every(([name, value]) => point.attributes[name] === value),
    )
    .reduce((sum, point) => sum + (point.value as number), 0)
}
