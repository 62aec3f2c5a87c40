import { and, eq, sql } from 'drizzle-orm'
import {
  type ClaimInput,
  type CompleteInput,
  claimedRecord,
  type StoreTransaction,
  type TransactionClaimOptions,
  type TransactionClaimResult,
} from '../../store'
import {
  claimsUnderLock,
  createDrizzleStore,
  type DrizzlePgDatabase,
  insertOrReadQuery,
  maxClaimAttempts,
  postgresErrorCode,
  standingRecord,
  uncached,
} from './store'
import type { IdempotencyTable } from './table'

/*
 * Transactional mode on PostgreSQL: the claim, the handler's writes and the completion are
 * statements of ONE transaction on the user's database.
 *
 *   BEGIN
 *   set lock_timeout (remember the caller's)      bounds the wait on a concurrent claim
 *   claim: INSERT … ON CONFLICT DO NOTHING        waits while another transaction holds an
 *                                                 uncommitted claim of the key, then reads
 *   restore lock_timeout
 *   SAVEPOINT  → handler writes → RELEASE         (ROLLBACK TO on a recorded error)
 *   UPDATE … completed                            the outcome
 *   COMMIT                                        record and business rows, together
 *
 * Until COMMIT nobody else sees the claim: there is no visible in_progress record and so no
 * lease to expire or take over. A concurrent duplicate's INSERT blocks on the uncommitted row
 * (a unique-index wait) until the first transaction ends: after a commit it reads the completed
 * record and replays; after a rollback (crash, unexpected error) the key is free and it claims
 * it. `lock_timeout` turns an endless wait into `interrupted: 'lock-wait'` (409 upstream).
 */

/** SQLSTATEs that end the claim without an answer but are not store failures. */
const lockNotAvailable = '55P03'
const concurrencyFailures = ['40001', '40P01'] // serialization_failure, deadlock_detected

/** `db.transaction(fn)` with a {@link StoreTransaction} over the transaction. */
export function runDrizzleTransaction<TTransaction, T>(
  db: DrizzlePgDatabase,
  table: IdempotencyTable,
  fn: (transaction: StoreTransaction<TTransaction>) => Promise<T>,
): Promise<T> {
  return db.transaction((tx) => fn(createStoreTransaction<TTransaction>(tx, table)))
}

/**
 * The statements of one transaction (or savepoint). They are built per transaction because a
 * drizzle statement is bound to the connection it runs on; they are plain (unnamed) queries.
 * The rare second phase of a claim runs the store's own claim statement, built on this
 * transaction for the occasion.
 */
function createStoreTransaction<TTransaction>(
  tx: DrizzlePgDatabase,
  table: IdempotencyTable,
): StoreTransaction<TTransaction> {
  /** Sets `lock_timeout` for the rest of the transaction; returns the value it replaced. */
  async function setLockTimeout(value: string): Promise<string> {
    // Never from a drizzle query cache: the statement is run for its side effect.
    const [row] = await uncached(
      tx
        .select({
          previous: sql<string>`p.previous`,
          applied: sql<string>`set_config('lock_timeout', ${value}, true)`,
        })
        // The subquery reads the caller's setting before the outer row sets the new one.
        .from(sql`(select current_setting('lock_timeout') as previous offset 0) as p`),
    )
    return row?.previous ?? '0'
  }

  async function claim(input: ClaimInput): Promise<TransactionClaimResult> {
    for (let attempt = 1; attempt <= maxClaimAttempts; attempt++) {
      const [row] = await insertOrReadQuery(tx, table, input)
      // No row: the record was committed after this statement's snapshot (typically by the very
      // transaction this one waited for). The next statement's snapshot has it.
      if (row === undefined) continue
      if (row.state > 0) {
        return {
          claimed: true,
          takeover: false,
          record: claimedRecord(input, row.lockedUntil, row.expiresAt),
        }
      }
      // A record to overwrite (it expired) or take over (a non-transactional executor's lease
      // ran out): the store's own claim decides that under the row lock, exactly as outside
      // transactional mode.
      if (claimsUnderLock(row, input.fingerprint))
        return createDrizzleStore(tx, { table }).claim(input)
      return { claimed: false, record: standingRecord(input, row), now: row.now }
    }
    throw new Error(
      `idempotent-mutations: the transactional claim of a key read no record ${maxClaimAttempts} times in a row`,
    )
  }

  const session: StoreTransaction<TTransaction> = {
    handle: tx as TTransaction,

    async claim(input: ClaimInput, options: TransactionClaimOptions) {
      // 0 would mean "wait forever" to PostgreSQL; the wait is always bounded.
      const waitMs = Math.min(Math.max(1, Math.ceil(options.lockWaitMs)), 2_147_483_647)
      try {
        const previous = await setLockTimeout(`${waitMs}ms`)
        const result = await claim(input)
        // The handler's statements run under the caller's lock_timeout, not the claim's.
        if (result.claimed) await setLockTimeout(previous)
        return result
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
      const rows = await tx
        .update(table)
        .set({
          status: sql`'completed'`,
          response: input.response,
          // Counted from this statement, not from the transaction's start (now()), so a long
          // handler does not shorten the replay window.
          expiresAt: sql`statement_timestamp() + ${input.ttlMs}::float8 * interval '1 millisecond'`,
        })
        .where(
          and(
            eq(table.scope, input.scope),
            eq(table.key, input.key),
            sql`${table.status} = 'in_progress'`,
            eq(table.leaseToken, input.leaseToken),
          ),
        )
        .returning({ key: table.key })
      return rows.length > 0
    },

    savepoint<T>(fn: (transaction: StoreTransaction<TTransaction>) => Promise<T>): Promise<T> {
      // A drizzle transaction's nested transaction is a savepoint.
      return tx.transaction((nested) => fn(createStoreTransaction<TTransaction>(nested, table)))
    },
  }
  return session
}
