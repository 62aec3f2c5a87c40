/** The retry policy both client halves share (`defaultRetryOn`, backoff, `maxAttempts`). */
export {
  abortableSleep,
  type BackoffOptions,
  defaultClientLogger,
  defaultGenerateKey,
  defaultRetryOn,
  parseRetryAfter,
  type RetryEvent,
  type RetryFailure,
  type RetryOptions,
} from './retry'
