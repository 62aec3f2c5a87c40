/**
 * What OpenTelemetry costs on the engine's path (memory store): an engine with telemetry turned
 * off, the default engine in a process with no SDK registered (the global providers are
 * no-ops), the same again as an A/A control, and an engine recording into an SDK (spans through
 * a tracer provider with no exporter, metrics aggregated by a meter provider). All interleaved
 * in one comparison, so the ratios hold whatever the machine does meanwhile.
 */
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics'
import { BasicTracerProvider } from '@opentelemetry/sdk-trace-base'
import type { Library } from '../lib/build'
import { type Budget, byName, compare, pairedRatio, round, type VariantStats } from '../lib/measure'
import { type Order, orderInput } from './fixtures'

/** The engines compared, by what they record into. */
export const telemetrySetups = ['telemetry off', 'no SDK', 'no SDK (A/A)', 'SDK'] as const
type Setup = (typeof telemetrySetups)[number]
type Paths = { first: number; replay: number }

export interface TelemetryResult {
  budget: Budget
  variants: VariantStats[]
  /** CPU µs per operation over a direct call of the handler, per setup and path. */
  overheadUs: Record<Setup, Paths>
  /** Time per operation, one setup ÷ another: medians of the quotients within each round. */
  ratios: {
    /** The default engine without an SDK ÷ telemetry off: what the library costs when idle. */
    noSdkVsOff: Paths
    /** The A/A control: the default engine twice, second ÷ first (the run's noise). */
    control: Paths
    /** Recording into an SDK ÷ no SDK. */
    sdkVsNoSdk: Paths
  }
}

/** A reader nobody collects from: the SDK still aggregates every measurement it gets. */
class IdleReader extends MetricReader {
  protected async onShutdown(): Promise<void> {}
  protected async onForceFlush(): Promise<void> {}
}

const replayKeys = 1000

export async function benchTelemetry(lib: Library, budget: Budget): Promise<TelemetryResult> {
  let orders = 0
  const handler = async (): Promise<Order> => ({
    id: `order-${++orders}`,
    item: orderInput.item,
    quantity: orderInput.quantity,
    total: orderInput.quantity * 99.75,
  })
  const tracerProvider = new BasicTracerProvider()
  const meterProvider = new MeterProvider({ readers: [new IdleReader()] })
  const telemetry: Record<Setup, Parameters<Library['core']['createIdempotency']>[0]['telemetry']> =
    {
      'telemetry off': false,
      'no SDK': undefined,
      'no SDK (A/A)': undefined,
      SDK: { tracerProvider, meterProvider },
    }
  const engines = telemetrySetups.map((setup) => {
    const idempotency = lib.core.createIdempotency({
      store: lib.core.createMemoryStore(),
      telemetry: telemetry[setup],
    })
    const run = (key: string) =>
      idempotency.execute({ key, operation: 'orders.create', payload: orderInput }, handler)
    return { setup, run }
  })
  for (const { run } of engines) {
    for (let i = 0; i < replayKeys; i++) await run(`replay-${i}`)
  }

  const variants = [
    { name: 'direct call', op: () => handler() },
    ...engines.flatMap(({ setup, run }) => [
      { name: `${setup}: first execution`, op: (i: number) => run(`first-${i}`) },
      { name: `${setup}: replay`, op: (i: number) => run(`replay-${i % replayKeys}`) },
    ]),
  ]
  const stats = await compare(variants, budget)
  await Promise.all([tracerProvider.shutdown(), meterProvider.shutdown()])

  const direct = byName(stats, 'direct call').cpuUsPerOp
  const over = (name: string) => round(byName(stats, name).cpuUsPerOp - direct, 2)
  const overheadUs = Object.fromEntries(
    telemetrySetups.map((setup) => [
      setup,
      { first: over(`${setup}: first execution`), replay: over(`${setup}: replay`) },
    ]),
  ) as Record<Setup, Paths>
  const paired = (a: Setup, b: Setup): Paths => ({
    first: pairedRatio(
      byName(stats, `${a}: first execution`),
      byName(stats, `${b}: first execution`),
    ),
    replay: pairedRatio(byName(stats, `${a}: replay`), byName(stats, `${b}: replay`)),
  })
  return {
    budget,
    variants: stats,
    overheadUs,
    ratios: {
      noSdkVsOff: paired('no SDK', 'telemetry off'),
      control: paired('no SDK (A/A)', 'no SDK'),
      sdkVsNoSdk: paired('SDK', 'no SDK'),
    },
  }
}
