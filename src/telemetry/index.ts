/** OpenTelemetry traces and metrics of keyed operations (see ./telemetry.ts). */
export { attributeNames, metricNames, type TelemetryOutcome } from './names'
export type { TelemetryMeterProvider, TelemetryOptions, TelemetryTracerProvider } from './options'
export { createTelemetry, Telemetry } from './telemetry'
export { OperationTrace, runUnderOperation } from './trace'
