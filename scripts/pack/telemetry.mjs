// The pack check's OpenTelemetry step: an app that registers the SDK sees the keyed operations.
import { mkdirSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fail, log, pkg, run } from './common.mjs'

export function nodeAtLeast(major, minor) {
  const [m, n] = process.versions.node.split('.').map(Number)
  return m > major || (m === major && n >= minor)
}

/** Installs the tarball beside each set of OpenTelemetry packages and runs {@link telemetryFile}. */
export function checkTelemetry(sets, tarball) {
  for (const [index, packages] of sets.entries()) {
    const app = join(dirname(tarball), `telemetry-${index}`)
    mkdirSync(app)
    writeFileSync(join(app, 'package.json'), JSON.stringify({ private: true, type: 'module' }))
    const flags = ['install', '--no-audit', '--no-fund', '--ignore-scripts', '--prefer-offline']
    run('npm', [...flags, tarball, ...packages], app)
    const traces = packages.some((name) => name.startsWith('@opentelemetry/sdk-trace-base'))
    writeFileSync(join(app, 'telemetry.mjs'), telemetryFile(pkg.name, traces))
    try {
      log(`${run(process.execPath, ['telemetry.mjs'], app).trim()} (${packages.join(', ')})`)
    } catch (error) {
      fail(
        `OpenTelemetry with ${packages.join(', ')}: ${error.stdout}${error.stderr || error.message}`,
      )
    }
  }
}

/** An app that registers the SDK globally and never passes it to the library. */
function telemetryFile(name, traces) {
  return `import { metrics, trace } from '@opentelemetry/api'
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics'
import { createIdempotency, createMemoryStore } from '${name}'

class Reader extends MetricReader {
  async onShutdown() {}
  async onForceFlush() {}
}
const reader = new Reader()
metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }))
let exporter
${
  traces
    ? `const sdk = await import('@opentelemetry/sdk-trace-base')
exporter = new sdk.InMemorySpanExporter()
trace.setGlobalTracerProvider(
  new sdk.BasicTracerProvider({ spanProcessors: [new sdk.SimpleSpanProcessor(exporter)] }),
)`
    : ''
}
const idempotency = createIdempotency({ store: createMemoryStore() })
const pay = () => idempotency.execute({ key: 'k1', operation: 'pay' }, () => ({ id: 1 }))
await pay()
await pay()
const { resourceMetrics } = await reader.collect()
const counter = resourceMetrics.scopeMetrics
  .flatMap((scope) => scope.metrics)
  .find((metric) => metric.descriptor.name === 'idempotency.operations')
const outcomes = (counter?.dataPoints ?? [])
  .map((point) => point.attributes['idempotency.outcome'] + '=' + point.value)
  .sort()
if (outcomes.join() !== 'executed=1,replayed=1') {
  throw new Error('idempotency.operations: ' + JSON.stringify(outcomes))
}
let spans = []
if (exporter) {
  spans = exporter.getFinishedSpans().map((span) => span.name + ':' + (span.attributes['idempotency.outcome'] ?? '-'))
  if (!spans.includes('idempotency pay:executed') || !spans.includes('idempotency pay:replayed')) {
    throw new Error('spans: ' + JSON.stringify(spans))
  }
}
console.log('OpenTelemetry saw the keyed operations: ' + outcomes.join(', ') + (exporter ? '; spans ' + spans.join(', ') : ''))
`
}
