import type { StoreTransaction } from './store'

/**
 * A store transaction (or savepoint) held open across calls. Stores run transactions the way
 * drizzle does, through a callback that commits when it returns; but the engine decides how an
 * operation ends later, from another call (`lease.complete()`, or an adapter hook that runs
 * after the handler returned). So the callback is started here and parked on a promise until
 * that decision: `commit()` lets it return, `rollback()` makes it throw.
 */
export interface HeldTransaction<TTransaction> {
  readonly session: StoreTransaction<TTransaction>
  /** Ends it with COMMIT (RELEASE for a savepoint). Rejects with the database's error if that fails. */
  commit(): Promise<void>
  /**
   * Ends it with ROLLBACK (ROLLBACK TO for a savepoint). Rejects only if that fails; after
   * `commit()` it does nothing.
   */
  rollback(): Promise<void>
  /**
   * Resolves true while the transaction (and, for a savepoint, the transaction it is in) can
   * still take statements, false once it ended on its own, before it was told how to end: its
   * connection closed, and the driver settled it (postgres.js does). Checked after the
   * callbacks already due have run (a macrotask), so the end of a connection that failed the
   * statement before is seen. A statement sent to a transaction that ended so would go to a
   * closed connection: postgres.js then throws from a timer (an uncaught exception), or sends it
   * on the connection's next session, outside any transaction.
   */
  open(): Promise<boolean>
  /** The same as {@link open}, without waiting: what is known now. */
  ended(): boolean
}

/** What `commit()` rejects with when the transaction ended on its own before it: nothing committed. */
export class TransactionEndedError extends Error {
  override name = 'TransactionEndedError'
  constructor(options: { cause?: unknown } = {}) {
    super(
      'idempotent-mutations: the transaction ended before it was committed (its connection closed); nothing was committed',
      options.cause === undefined ? undefined : { cause: options.cause },
    )
  }
}

/**
 * Resolves after the callbacks already due have run (a macrotask): by then, a connection that
 * closed before has settled what its driver settles on a close.
 */
export const afterDueCallbacks = (): Promise<void> =>
  new Promise<void>((resolve) => setImmediate(resolve))

/** What the parked callback throws to roll back; never seen outside this module. */
const rollbackSignal = new Error('idempotent-mutations: rolled back on purpose')

/**
 * Starts `run` (a store's `transaction` or a session's `savepoint`) and resolves once its
 * callback holds the session, or rejects with the error that kept it from starting.
 */
export async function holdTransaction<TTransaction>(
  run: (
    fn: (session: StoreTransaction<TTransaction>) => Promise<void>,
  ) => Promise<void> | PromiseLike<void>,
  /** For a savepoint: the transaction it is in, which ends it when it ends. */
  parent?: HeldTransaction<TTransaction>,
): Promise<HeldTransaction<TTransaction>> {
  let handOver!: (session: StoreTransaction<TTransaction>) => void
  let failToStart!: (error: unknown) => void
  const started = new Promise<StoreTransaction<TTransaction>>((resolve, reject) => {
    handOver = resolve
    failToStart = reject
  })
  let decide!: (commit: boolean) => void
  const decision = new Promise<boolean>((resolve) => {
    decide = resolve
  })

  const ended = Promise.resolve().then(() =>
    run(async (session) => {
      handOver(session)
      if (!(await decision)) throw rollbackSignal
    }),
  )
  // Settles `started` if the transaction ended before handing its session over (BEGIN failed);
  // after a hand-over this is a no-op, and it keeps `ended` from being an unhandled rejection.
  // An end before the decision means the driver gave the transaction up (its connection closed).
  let endedUndecided = false
  let endError: unknown
  let decided = false
  let handedOver = false
  ended.then(
    () => {
      if (!decided) endedUndecided = true
      // Built only when it is needed: an error's stack costs more than the rest of an ending.
      if (!handedOver) {
        failToStart(new Error('idempotent-mutations: the transaction ended before it started'))
      }
    },
    (error: unknown) => {
      if (!decided) {
        endedUndecided = true
        endError = error
      }
      failToStart(error)
    },
  )
  const session = await started
  handedOver = true

  const isEnded = (): boolean => endedUndecided || (parent?.ended() ?? false)
  let ending: Promise<void> | undefined
  const end = (commit: boolean): Promise<void> => {
    // After the callbacks already due: a connection that just failed a statement has settled
    // the transaction by then.
    ending ??= afterDueCallbacks().then(() => {
      if (isEnded()) {
        // Never wake the parked callback of a transaction that is over: the driver would send
        // its COMMIT or ROLLBACK to a connection that is gone. The database rolled it back.
        if (commit) throw new TransactionEndedError({ cause: endError })
        return
      }
      decided = true
      decide(commit)
      return ended.then(
        () => undefined,
        (error: unknown) => {
          if (error !== rollbackSignal) throw error
          // A rollback asked for and done; a commit that ended in this signal cannot happen.
        },
      )
    })
    return ending
  }
  return {
    session,
    ended: isEnded,
    open: async () => {
      await afterDueCallbacks()
      return !isEnded()
    },
    commit: () => end(true),
    // Once the end is decided, the transaction is over either way (a failed COMMIT leaves
    // nothing behind), so a later rollback has nothing left to do.
    rollback: () => (ending === undefined ? end(false) : ending.catch(() => undefined)),
  }
}
