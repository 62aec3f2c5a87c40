export { type Codec, defaultCodec } from './codec'
export { type Duration, toMilliseconds } from './duration'
export { createIdempotency } from './engine/create'
export { unkeyedContext } from './engine/lease'
export {
  assertTransactionalStore,
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
export { fingerprint } from './fingerprint'
export {
  agreeOnKey,
  callerScope,
  defaultKeyField,
  idempotencyKeyHeader,
  parseKeyHeader,
  readKeyHeader,
  splitInputKey,
  validateKey,
} from './key'
export { defaultReplayCacheOptions, type ReplayCacheOptions } from './replay-cache'
export type {
  ClaimInput,
  ClaimResult,
  CompleteInput,
  IdempotencyRecord,
  IdempotencyStore,
  RecordStatus,
  ReleaseInput,
  StoreTransaction,
  SweepOptions,
  TransactionClaimOptions,
  TransactionClaimResult,
} from './store'
export { createMemoryStore, type MemoryStoreOptions } from './stores/memory'
