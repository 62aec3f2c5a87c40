export { type Codec, defaultCodec } from './codec'
export { type Duration, toMilliseconds } from './duration'
export {
  type Attempt,
  assertTransactionalStore,
  createIdempotency,
  defaultLogger,
  defaultStoreErrors,
  type ExecuteRequest,
  type ExecuteResult,
  type HandlerContext,
  type Idempotency,
  type IdempotencyEvent,
  type IdempotencyEventType,
  type IdempotencyOptions,
  type Lease,
  type Logger,
  type OperationRequest,
  type Outcome,
  ReplayedError,
  unkeyedContext,
} from './engine'
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
