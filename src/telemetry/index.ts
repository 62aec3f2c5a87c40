/** OpenTelemetry traces and metrics of keyed operations (see ./telemetry.ts). */
export { attributeNames, metricNames, type TelemetryOutcome } from './names'
export type { TelemetryMeterProvider, TelemetryOptions, TelemetryTracerProvider } from './options'
export { createTelemetry, OperationTrace, runUnderOperation, Telemetry } from './telemetry'
