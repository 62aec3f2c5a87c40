/**
 * How a keyed operation's lease ends, in one place for the engine and every adapter: the
 * failure policy (which failures are recorded and replayed, which release the key) and the
 * settling protocol (exactly one of complete, completeWithError or release).
 *
 * Transport-free, and free of engine imports (the engine builds on this file, not the other
 * way round): a lease is anything with the three settling methods.
 */

/** The three ways a lease ends. Exactly one of them is called, once. */
export interface Settleable {
  /** Records the value as the outcome. */
  complete(value: unknown): Promise<void>
  /** Records a deterministic failure as the outcome. */
  completeWithError(errorData: unknown): Promise<void>
  /** Deletes the record so a retry can run again. */
  release(): Promise<void>
}

/**
 * The failure policy of the contract, read from an HTTP status: a failure whose status is a
 * 4xx other than 408 (timeout), 409 (conflict) and 429 (rate limit) is deterministic, so it is
 * recorded and replayed; those three say "try again", and a retry may well get past them. A
 * 5xx, or no status at all, is not deterministic: the key is released.
 *
 * Every default failure policy is this function read in its host's terms:
 * `defaultStoreErrors` (an error's `status`), tRPC's (its error code's status),
 * GraphQL's (`extensions.http.status`), plain HTTP's (the response status).
 */
export function isDeterministicStatus(status: number): boolean {
  return status >= 400 && status < 500 && status !== 408 && status !== 409 && status !== 429
}

/**
 * The engine's default failure policy: an error that carries an HTTP-like `status` (or
 * `statusCode`) for which {@link isDeterministicStatus} holds is recorded; anything else
 * releases the key so a retry can run again.
 */
export function defaultStoreErrors(error: unknown): boolean {
  if (error === null || typeof error !== 'object') return false
  const { status, statusCode } = error as { status?: unknown; statusCode?: unknown }
  const code = typeof status === 'number' ? status : statusCode
  return typeof code === 'number' && isDeterministicStatus(code)
}

/** What decides the fate of a failure, and what is told when deciding itself fails. */
export interface FailurePolicy<TFailure = unknown> {
  /** True when the failure is deterministic: recorded and replayed. Anything but `true` releases. */
  storeErrors(failure: TFailure): boolean
  /** The record data of a failure the policy keeps. @default the failure itself */
  serializeError?: ((failure: TFailure) => unknown) | undefined
  /**
   * Told when `storeErrors` or `serializeError` throws. The key is then released and the
   * operation's own failure stands: a broken policy never leaves a key in progress until its
   * lease runs out, nor replaces the error the caller gets.
   */
  onPolicyError(thrown: unknown): void
}

/**
 * Asks `policy` about one failure. A policy that throws counts as "release" (and is reported),
 * so the caller always has an answer to settle with.
 */
export function keepsFailure<TFailure>(
  policy: Pick<FailurePolicy<TFailure>, 'storeErrors' | 'onPolicyError'>,
  failure: TFailure,
): boolean {
  try {
    return policy.storeErrors(failure) === true
  } catch (thrown) {
    policy.onPolicyError(thrown)
    return false
  }
}

/**
 * What to record of one failure: its record data when the policy keeps it, undefined when the
 * key is to be released. A policy that throws releases (and is reported).
 */
export function recordedFailure<TFailure>(
  policy: FailurePolicy<TFailure>,
  failure: TFailure,
): { errorData: unknown } | undefined {
  if (!keepsFailure(policy, failure)) return undefined
  if (!policy.serializeError) return { errorData: failure }
  try {
    return { errorData: policy.serializeError(failure) }
  } catch (thrown) {
    policy.onPolicyError(thrown)
    return undefined
  }
}

/**
 * Settles the lease of an operation that failed with `failure`: completed with its record data
 * when the policy keeps it, released otherwise. Resolves to whether it was recorded. A
 * completion that fails (in transactional mode, a commit) rejects; the caller decides what the
 * client then gets.
 */
export async function settleFailure<TFailure>(
  lease: Settleable,
  failure: TFailure,
  policy: FailurePolicy<TFailure>,
): Promise<boolean> {
  const recorded = recordedFailure(policy, failure)
  if (recorded) await lease.completeWithError(recorded.errorData)
  else await lease.release()
  return recorded !== undefined
}

/**
 * Runs `operation` under `lease` and settles the lease exactly once: completed with the value
 * it returns; if it throws, completed with the failure or released, as `policy` decides, and
 * the failure is rethrown. This is the whole protocol for a host that sees an operation's end
 * where it started it (the engine's `execute`); hosts that see the end in another hook call
 * `settleFailure` and `complete` themselves, once.
 */
export async function runUnderLease<T, TFailure = unknown>(
  lease: Settleable,
  operation: () => T | Promise<T>,
  policy: FailurePolicy<TFailure>,
): Promise<T> {
  let value: T
  try {
    value = await operation()
  } catch (failure) {
    await settleFailure(lease, failure as TFailure, policy)
    throw failure
  }
  await lease.complete(value)
  return value
}
