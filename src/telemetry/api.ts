/**
 * The OpenTelemetry API, an optional peer dependency: loaded once, synchronously, when the first
 * engine that wants telemetry is created, and undefined when it is not installed (the library
 * then records nothing and costs nothing). Synchronous because `createIdempotency` is: an
 * `import()` would leave the first operations of a fresh engine untraced.
 *
 * One copy of the API or several (a CommonJS and an ESM one, two versions in one tree), they
 * share the providers an SDK registers: the API keeps them on a global of its own.
 */
import { createRequire } from 'node:module'
import type * as OpenTelemetryModule from '@opentelemetry/api'

export type OpenTelemetryApi = typeof OpenTelemetryModule

let loaded: { api: OpenTelemetryApi | undefined } | undefined

/** The API, or undefined when `@opentelemetry/api` cannot be loaded. */
export function loadOpenTelemetry(): OpenTelemetryApi | undefined {
  if (loaded === undefined) {
    let api: OpenTelemetryApi | undefined
    try {
      api = createRequire(import.meta.url)('@opentelemetry/api') as OpenTelemetryApi
    } catch {
      api = undefined
    }
    loaded = { api }
  }
  return loaded.api
}
