/**
 * The engine's `telemetry` option. The provider types are written out here rather than taken
 * from `@opentelemetry/api`, so that the library's types compile where the API is not installed;
 * the API's own `TracerProvider` and `MeterProvider` fit them.
 */

/** An OpenTelemetry `TracerProvider` (`trace.getTracerProvider()`, an SDK's provider). */
export interface TelemetryTracerProvider {
  getTracer(name: string, version?: string): unknown
}

/** An OpenTelemetry `MeterProvider` (`metrics.getMeterProvider()`, an SDK's provider). */
export interface TelemetryMeterProvider {
  getMeter(name: string, version?: string): unknown
}

export interface TelemetryOptions {
  /**
   * Where the spans go.
   * @default undefined (the global provider: the SDK's, once one is registered)
   */
  tracerProvider?: TelemetryTracerProvider | undefined
  /**
   * Where the metrics go.
   * @default undefined (the global provider: the SDK's, once one is registered)
   */
  meterProvider?: TelemetryMeterProvider | undefined
  /**
   * Put each operation's key on its span (`idempotency.key`). Keys can be user data (an order
   * number, an email), so they are left out unless asked for. Never on metrics.
   * @default false
   */
  recordKeys?: boolean | undefined
  /**
   * The store's name in attributes (`idempotency.store`).
   * @default undefined (memory, postgresql, mysql, sqlite or redis for the shipped stores,
   * custom for any other)
   */
  store?: string | undefined
}

export const defaultTelemetryOptions = Object.freeze({ recordKeys: false } as const)

/** A Drizzle table's class names its dialect under this symbol (drizzle-orm's `entityKind`). */
const drizzleEntityKind = Symbol.for('drizzle:entityKind')
const drizzleDialects: Record<string, string> = {
  PgTable: 'postgresql',
  MySqlTable: 'mysql',
  SQLiteTable: 'sqlite',
}

/**
 * The name of a store the library ships, from what it exposes: the memory store keeps records
 * in this process, the Redis store names its records' keys, the Drizzle store has its table.
 * Anything else is `custom`.
 */
export function storeKind(store: object): string {
  const shape = store as {
    inProcess?: unknown
    recordKey?: unknown
    library?: unknown
    table?: { constructor?: unknown } | undefined
  }
  if (shape.inProcess === true) return 'memory'
  if (typeof shape.recordKey === 'function' && shape.library !== undefined) return 'redis'
  const tableClass = shape.table?.constructor as Record<symbol, unknown> | undefined
  const entity = tableClass?.[drizzleEntityKind]
  return (typeof entity === 'string' && drizzleDialects[entity]) || 'custom'
}
