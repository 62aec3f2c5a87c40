import { type IdempotencyError, isIdempotencyError, type Lease, type Logger } from '../../src'
import type { FailurePolicy } from '../../src/settle'

/**
 * The failure policy an adapter settles with: its `storeErrors` (or plain HTTP's `storeStatus`:
 * `option` names it in the log line), what it records of a failure it keeps, and the logger
 * that hears of a policy that throws (the key is then released).
 */
export function failurePolicy<TFailure>(
  storeErrors: (failure: TFailure) => boolean,
  logger: Logger,
  { serializeError, option = 'storeErrors' }: FailurePolicyOptions<TFailure> = {},
): FailurePolicy<TFailure> {
  return {
    storeErrors,
    serializeError,
    onPolicyError: (thrown) => logger.error(`${option} threw; the key is released`, thrown),
  }
}

export interface FailurePolicyOptions<TFailure> {
  /** The record data of a failure the policy keeps. @default the failure itself */
  serializeError?: ((failure: TFailure) => unknown) | undefined
  /** The option's name, for the log line. @default 'storeErrors' */
  option?: string | undefined
}

/**
 * Waits for a settling call. Resolves to the engine error the client must get instead of the
 * outcome, or undefined: in transactional mode completing commits, and a commit that failed
 * (503 `STORE_UNAVAILABLE`: nothing happened) or whose answer was lost (503 `OUTCOME_UNKNOWN`:
 * it may have happened) must not reach the client as a success. Retry with the same key
 * either way. Anything else rejects.
 */
export async function refusalOf(settling: Promise<unknown>): Promise<IdempotencyError | undefined> {
  try {
    await settling
  } catch (error) {
    if (isIdempotencyError(error)) return error
    throw error
  }
  return undefined
}

/**
 * The lease of one keyed operation whose end is seen in a later hook than its claim (GraphQL's
 * result hooks, Apollo's `willSendResponse`, the end of a request): settled exactly once,
 * whichever hook gets there first; the later ones find it settled and do nothing.
 *
 *     claim hook       begin -> new Settlement(lease)
 *     execution        recordable = does the policy keep the executor's own outcome?
 *     result hook      settle(() => record of what the client gets): complete, or release
 *     end of request   settle(undefined): release, if nothing settled it before
 */
export class Settlement {
  /** Set once the operation's own outcome is known: may it be recorded? */
  recordable: boolean | undefined = undefined
  #settled = false

  constructor(readonly lease: Lease) {}

  get settled(): boolean {
    return this.#settled
  }

  /**
   * Settles the lease, the first time only: completed with `record()` when the outcome is
   * recordable and there is one, released otherwise. Resolves to the engine error the client
   * must get instead of the outcome (see {@link refusalOf}), or undefined.
   */
  async settle(record: (() => unknown) | undefined): Promise<IdempotencyError | undefined> {
    if (this.#settled) return undefined
    this.#settled = true
    const { lease } = this
    if (record === undefined || this.recordable !== true) return refusalOf(lease.release())
    let value: unknown
    try {
      value = record()
    } catch (error) {
      await lease.release()
      throw error
    }
    return refusalOf(lease.complete(value))
  }

  /**
   * True when the operation's writes were rolled back: it ran in a transaction and its outcome
   * was not recorded. What the client got then describes writes that no longer exist.
   */
  get rolledBack(): boolean {
    return this.lease.tx !== undefined && this.recordable !== true
  }
}
