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
}

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
  ended.then(
    () => failToStart(new Error('idempotent-mutations: the transaction ended before it started')),
    failToStart,
  )
  const session = await started

  let ending: Promise<void> | undefined
  const end = (commit: boolean): Promise<void> => {
    if (ending === undefined) {
      decide(commit)
      ending = ended.then(
        () => undefined,
        (error: unknown) => {
          if (error !== rollbackSignal) throw error
          // A rollback asked for and done; a commit that ended in this signal cannot happen.
        },
      )
    }
    return ending
  }
  return {
    session,
    commit: () => end(true),
    // Once the end is decided, the transaction is over either way (a failed COMMIT leaves
    // nothing behind), so a later rollback has nothing left to do.
    rollback: () => (ending === undefined ? end(false) : ending.catch(() => undefined)),
  }
}
