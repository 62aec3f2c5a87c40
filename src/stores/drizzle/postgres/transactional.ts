import type {
  ClaimInput,
  CompleteInput,
  StoreTransaction,
  TransactionClaimOptions,
  TransactionClaimResult,
} from '../../../store'
import { claimInPhases } from '../claim'
import { claimRowOf } from '../rows'
import { drizzleLoggerOf, type StatementRunner, sessionClientOf } from '../runner'
import { postgresErrorCode } from '../store'
import {
  guardPostgresJsTransaction,
  listenForConnectionErrors,
  nodePostgresPoolOf,
  onPoolClient,
  type TransactionLife,
  transactionLife,
} from './connections'
import { directRunnerFor, drizzleRunner } from './drivers'
import { type PGliteRunner, pgliteTransactionOf } from './pglite'
import { boundedClaimRowOf, type PostgresStatements } from './sql'

/*
 * Transactional mode on PostgreSQL: the claim, the handler's writes and the completion are
 * statements of ONE transaction on the user's database.
 *
 *   BEGIN
 *   claim: INSERT … ON CONFLICT DO NOTHING        waits while another transaction holds an
 *                                                 uncommitted claim of the key, then reads;
 *                                                 the same statement sets lock_timeout to
 *                                                 bound that wait and, if it claimed, puts
 *                                                 the caller's back
 *   SAVEPOINT  → handler writes → RELEASE         (ROLLBACK TO on a recorded error; postgres.js
 *                                                 sends no RELEASE, and gets the SAVEPOINT
 *                                                 sent behind the claim's first statement,
 *                                                 in the same round trip)
 *   UPDATE … completed                            the outcome
 *   COMMIT                                        record and business rows, together
 *
 * Until COMMIT nobody else sees the claim: there is no visible in_progress record and so no
 * lease to expire or take over. A concurrent duplicate's INSERT blocks on the uncommitted row
 * (a unique-index wait) until the first transaction ends: after a commit its claim runs once
 * more (its snapshot predates the commit) and replays the completed record; after a rollback
 * (crash, unexpected error) the key is free and it claims it. `lock_timeout` turns an endless
 * wait into `interrupted: 'lock-wait'` (409 upstream).
 *
 * Each transaction's statements go through a runner on its own connection: postgres.js's and
 * node-postgres's prepared statements, PGlite's session functions (created before the
 * transaction begins: inside it, the instance that would create them waits for it to end), or
 * drizzle's query path on the transaction for other drivers.
 */

/** SQLSTATEs that end the claim without an answer but are not store failures. */
const lockNotAvailable = '55P03'
const concurrencyFailures = ['40001', '40P01'] // serialization_failure, deadlock_detected

/** `db.transaction(fn)` with a {@link StoreTransaction} over the transaction. */
export function runDrizzleTransaction<TTransaction, T>(
  db: object,
  statements: PostgresStatements,
  pglite: PGliteRunner | undefined,
  fn: (transaction: StoreTransaction<TTransaction>) => Promise<T>,
): Promise<T> {
  const context = { statements, pglite }
  const begin = (): Promise<T> => {
    const pool = nodePostgresPoolOf(db)
    if (pool) {
      return onPoolClient(db, pool, (tx: object) =>
        fn(createStoreTransaction<TTransaction>(tx, context, transactionLife())),
      )
    }
    let detach: (() => void) | undefined
    const life = transactionLife()
    const running = (db as Transactional).transaction((tx) => {
      detach = listenForConnectionErrors(sessionClientOf(tx))
      return fn(createStoreTransaction<TTransaction>(tx, context, life))
    })
    running.then(life.end, life.end)
    return running.finally(() => detach?.())
  }
  if (!pglite) return begin()
  const { insertOrRead, underLock, boundedClaim, complete } = statements
  return pglite.ensure([insertOrRead, underLock, boundedClaim, complete]).then(begin)
}

/** A drizzle database or transaction, as far as its `transaction` goes. */
interface Transactional {
  transaction<T>(run: (tx: object) => Promise<T>): Promise<T>
}

interface TransactionContext {
  statements: PostgresStatements
  pglite: PGliteRunner | undefined
}

/** The runner of one transaction: on its own connection, past drizzle where the driver allows. */
function transactionRunner(tx: object, pglite: PGliteRunner | undefined): StatementRunner {
  const connection = sessionClientOf(tx)
  const pgliteTransaction = pglite && pgliteTransactionOf(connection)
  if (pglite && pgliteTransaction) return pglite.within(pgliteTransaction)
  return directRunnerFor(connection, drizzleLoggerOf(tx)) ?? drizzleRunner(tx)
}

/** The statements of one transaction (or savepoint). */
function createStoreTransaction<TTransaction>(
  tx: object,
  context: TransactionContext,
  life: TransactionLife,
): StoreTransaction<TTransaction> {
  const { statements, pglite } = context
  // Before the runner takes the transaction's connection: the store's own statements go through
  // the guard too, as the handler's do (./connections.ts).
  if (!pglite) guardPostgresJsTransaction(tx, life)
  const runner = transactionRunner(tx, pglite)
  const firstRow = async (statement: keyof PostgresStatements, values: object) =>
    (await runner.run(statements[statement], values))[0]

  async function claim(
    input: ClaimInput,
    lockWait: string,
    afterFirstStatement: (() => void) | undefined,
  ): Promise<TransactionClaimResult> {
    let previous: string | undefined
    const { result, attempt, underLock } = await claimInPhases(input, {
      async insertOrRead(attempt) {
        if (attempt > 1) return claimRowOf(await firstRow('insertOrRead', input))
        // Asked for at once (`then`, not `await`, which asks a microtask later), so that what
        // the caller sends next goes out behind it.
        const answer = runner
          .run(statements.boundedClaim, { ...input, lockWait })
          .then((rows) => rows[0])
        if (runner.pipelines) afterFirstStatement?.()
        const first = boundedClaimRowOf(await answer)
        previous = first.previous
        return first.found ? first.claim : undefined
      },
      // A record to overwrite (it expired) or take over (a non-transactional executor's lease
      // ran out), still within the bound.
      underLock: async () => claimRowOf(await firstRow('underLock', input)),
    })
    // The handler's statements run under the caller's lock_timeout, not the claim's: the first
    // statement put it back if it claimed; any other claiming statement did not. A refused
    // claim's transaction is rolled back by the engine, lock_timeout with it.
    const laterStatements = attempt > 1 || underLock
    if (result.claimed && laterStatements) {
      await runner.run(statements.setLockTimeout, { lockWait: previous })
    }
    return laterStatements ? { ...result, laterStatements } : result
  }

  return {
    handle: tx as TTransaction,

    async claim(input: ClaimInput, options: TransactionClaimOptions) {
      // 0 would mean "wait forever" to PostgreSQL; the wait is always bounded.
      const waitMs = Math.min(Math.max(1, Math.ceil(options.lockWaitMs)), 2_147_483_647)
      try {
        return await claim(input, `${waitMs}ms`, options.afterFirstStatement)
      } catch (error) {
        const code = postgresErrorCode(error)
        if (code === lockNotAvailable) return { claimed: false, interrupted: 'lock-wait' }
        if (code !== undefined && concurrencyFailures.includes(code)) {
          return { claimed: false, interrupted: 'serialization' }
        }
        throw error
      }
    },

    async complete(input: CompleteInput) {
      return (await runner.run(statements.complete, input)).length > 0
    },

    savepoint<T>(fn: (transaction: StoreTransaction<TTransaction>) => Promise<T>): Promise<T> {
      // A drizzle transaction's nested transaction is a savepoint.
      return (tx as Transactional).transaction((nested) =>
        fn(createStoreTransaction<TTransaction>(nested, context, life)),
      )
    },
  }
}
