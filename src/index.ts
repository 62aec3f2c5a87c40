// The root entry: what users of the engine need. Adapters in adapters/ import their plumbing
// (key sources, caller scopes, the handler context without a key) from the source modules.

// The engine, its options and their defaults.
export { type Codec, defaultCodec } from './codec'
export type { Duration } from './duration'
export { createIdempotency } from './engine/create'
export {
  defaultIdempotencyOptions,
  defaultLogger,
  defaultStoreErrors,
  type IdempotencyOptions,
} from './engine/options'
export { ReplayedError } from './engine/outcome'
export type {
  Attempt,
  ExecuteRequest,
  ExecuteResult,
  HandlerContext,
  Idempotency,
  IdempotencyEvent,
  IdempotencyEventType,
  Lease,
  Logger,
  OperationRequest,
  Outcome,
} from './engine/types'
// Errors, one class per code.
export {
  IdempotencyError,
  type IdempotencyErrorCode,
  InProgressError,
  idempotencyErrorStatus,
  isIdempotencyError,
  KeyInvalidError,
  KeyRequiredError,
  KeyReusedError,
  OutcomeUnknownError,
  ResponseNotStoredError,
  StoreUnavailableError,
} from './errors'
// A request's key and payload, for callers of `execute` on a transport of their own.
export { fingerprint } from './fingerprint'
export { readKeyHeader } from './key'
export { defaultReplayCacheOptions, type ReplayCacheOptions } from './replay-cache'
export { parseStoredScope, storedScope } from './scope'
// Stores: the contract, and the memory store.
export type {
  ClaimInput,
  ClaimResult,
  CompleteInput,
  IdempotencyRecord,
  IdempotencyStore,
  InspectableStore,
  RecordInspection,
  RecordStatus,
  ReleaseInput,
  ReleaseKeyOptions,
  ReleaseKeyResult,
  StoreTransaction,
  SweepOptions,
  TransactionClaimOptions,
  TransactionClaimResult,
} from './store'
export { createMemoryStore, type MemoryStoreOptions } from './stores/memory'
// OpenTelemetry: the engine's `telemetry` option.
export type {
  TelemetryMeterProvider,
  TelemetryOptions,
  TelemetryTracerProvider,
} from './telemetry/options'
