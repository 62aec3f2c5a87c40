import { and, type SQL, type SQLWrapper, sql } from 'drizzle-orm'
import {
  type ClaimInput,
  type CompleteInput,
  claimedRecord,
  type StoreTransaction,
  type TransactionClaimOptions,
  type TransactionClaimResult,
} from '../../store'
import { directStatementsOf } from './direct'
import { drizzleLoggerOf } from './pglite'
import {
  type ClaimRow,
  type ClaimValues,
  claimRowFields,
  claimRowOf,
  claimsUnderLock,
  createDrizzleStore,
  type DrizzlePgDatabase,
  insertedOrStanding,
  insertedRecord,
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
 *   claim: INSERT … ON CONFLICT DO NOTHING        waits while another transaction holds an
 *                                                 uncommitted claim of the key, then reads;
 *                                                 the same statement sets lock_timeout to
 *                                                 bound that wait and, if it claimed, puts
 *                                                 the caller's back
 *   SAVEPOINT  → handler writes → RELEASE         (ROLLBACK TO on a recorded error; postgres.js
 *                                                 sends no RELEASE)
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

/** A claim's inputs and the bound of its wait (`lock_timeout`), as SQL. */
type BoundedClaimValues = ClaimValues & { lockWait: SQLWrapper | string }

/**
 * The claim's first statement in transactional mode: it bounds its own wait on a concurrent
 * uncommitted claim (`lock_timeout` set to `lockWait` before the insert runs, which selects
 * from the `swap` CTE) and, when it claims, restores the caller's `lock_timeout` in its select
 * list, which is evaluated after the insert. One round trip instead of three. It always returns
 * one row: `found` 0 when the claim read nothing (then `lock_timeout` is still the bound).
 */
function boundedInsertOrRead(
  db: DrizzlePgDatabase,
  table: IdempotencyTable,
  values: BoundedClaimValues,
) {
  const swap = db.$with('swap', {}).as(sql`
    select p.previous, set_config('lock_timeout', ${values.lockWait}, true) as bound
    from (select current_setting('lock_timeout') as previous offset 0) as p`)
  // Never from a drizzle query cache: it has an INSERT in it and sets a setting.
  return uncached(
    db
      .with(swap, insertedRecord(db, table, values, sql`swap`))
      .select({
        ...claimRowFields,
        found: sql<number>`(r.state is not null)::int`.mapWith(Number),
        previous: sql<string>`swap.previous`,
        restored: sql`case when r.state = 1 then set_config('lock_timeout', swap.previous, true) end`,
      })
      .from(sql`swap left join lateral (${insertedOrStanding(table, values)}) as r on true`),
  )
}

/** The completion inside the transaction. */
function completion(
  db: DrizzlePgDatabase,
  table: IdempotencyTable,
  values: { [Name in keyof CompleteInput]: SQLWrapper | CompleteInput[Name] },
) {
  return db
    .update(table)
    .set({
      status: sql`'completed'`,
      response: sql`${values.response}`,
      // Counted from this statement, not from the transaction's start (now()), so a long
      // handler does not shorten the replay window.
      expiresAt: sql`statement_timestamp() + ${values.ttlMs}::float8 * interval '1 millisecond'`,
    })
    .where(
      and(
        sql`${table.scope} = ${values.scope}`,
        sql`${table.key} = ${values.key}`,
        sql`${table.status} = 'in_progress'`,
        sql`${table.leaseToken} = ${values.leaseToken}`,
      ),
    )
    .returning({ key: table.key })
}

const setLockTimeoutStatement = (value: SQLWrapper | string) =>
  sql`select set_config('lock_timeout', ${value}, true)`

/**
 * What transactional mode sends, built once per store with placeholders. On postgres.js and
 * node-postgres each transaction sends these texts to its own connection through the driver, as
 * prepared statements (see ./direct.ts): drizzle would render each statement's SQL anew for
 * every transaction. Other drivers (PGlite among them) go through drizzle, per transaction.
 */
export interface TransactionStatements {
  table: IdempotencyTable
  boundedClaim: Statement
  claim: Statement
  complete: Statement
  setLockTimeout: Statement
  name(kind: string): string
}

/** Each statement's name (node-postgres prepares it under `idempotent_mutations_<name>_<tag>`). */
const statementNames = {
  boundedClaim: 'tx_claim',
  claim: 'tx_insert_or_read',
  complete: 'tx_complete',
  setLockTimeout: 'tx_lock_timeout',
} as const

interface Statement {
  sql: string
  params: unknown[]
}

export function transactionStatements(
  db: DrizzlePgDatabase,
  table: IdempotencyTable,
  name: (kind: string) => string,
): TransactionStatements {
  const p = {
    scope: sql.placeholder('scope'),
    key: sql.placeholder('key'),
    fingerprint: sql.placeholder('fingerprint'),
    leaseToken: sql.placeholder('leaseToken'),
    lockTimeoutMs: sql.placeholder('lockTimeoutMs'),
    ttlMs: sql.placeholder('ttlMs'),
    lockWait: sql.placeholder('lockWait'),
    response: sql.placeholder('response'),
  }
  const dialect = (db as unknown as { dialect: { sqlToQuery(query: SQL): Statement } }).dialect
  return {
    table,
    boundedClaim: boundedInsertOrRead(db, table, p).toSQL(),
    claim: insertOrReadQuery(db, table, p).toSQL(),
    complete: completion(db, table, p).toSQL(),
    setLockTimeout: dialect.sqlToQuery(setLockTimeoutStatement(sql.placeholder('lockWait'))),
    name,
  }
}

/** `db.transaction(fn)` with a {@link StoreTransaction} over the transaction. */
export function runDrizzleTransaction<TTransaction, T>(
  db: DrizzlePgDatabase,
  statements: TransactionStatements,
  fn: (transaction: StoreTransaction<TTransaction>) => Promise<T>,
): Promise<T> {
  return db.transaction((tx) => fn(createStoreTransaction<TTransaction>(tx, statements)))
}

/** The driver's connection of a drizzle transaction (postgres.js and node-postgres keep it there). */
function connectionOf(tx: DrizzlePgDatabase): object {
  return { $client: (tx as { session?: { client?: unknown } }).session?.client }
}

/**
 * The statements of one transaction (or savepoint): sent straight to its connection when the
 * driver allows (see {@link TransactionStatements}), else built on the transaction through
 * drizzle. The rare second phase of a claim runs the store's own claim statement, built on this
 * transaction for the occasion.
 */
function createStoreTransaction<TTransaction>(
  tx: DrizzlePgDatabase,
  statements: TransactionStatements,
): StoreTransaction<TTransaction> {
  const { table } = statements
  const direct = directStatementsOf(connectionOf(tx), drizzleLoggerOf(tx))
  const send = (kind: keyof typeof statementNames, values: object) =>
    direct!(statements.name(statementNames[kind]), statements[kind]).run(
      values as Record<string, unknown>,
    )

  /** Sets `lock_timeout` for the rest of the transaction. */
  async function setLockTimeout(value: string): Promise<void> {
    if (direct) await send('setLockTimeout', { lockWait: value })
    else await tx.execute(setLockTimeoutStatement(value))
  }

  async function firstClaim(input: ClaimInput, lockWait: string) {
    const values = { ...input, lockWait }
    if (!direct) {
      const [row] = await boundedInsertOrRead(tx, table, values)
      return row
    }
    const [row] = await send('boundedClaim', values)
    if (row === undefined) return undefined
    const [found, previous] = row.slice(-3)
    return { ...claimRowOf(row)!, found: Number(found), previous: previous as string }
  }

  async function claimAgain(input: ClaimInput): Promise<ClaimRow | undefined> {
    if (!direct) return (await insertOrReadQuery(tx, table, input))[0]
    return claimRowOf((await send('claim', input))[0])
  }

  async function claim(input: ClaimInput, lockWait: string): Promise<TransactionClaimResult> {
    const first = await firstClaim(input, lockWait)
    if (first === undefined) {
      throw new Error('idempotent-mutations: the claim statement returned no row')
    }
    const restore = () => setLockTimeout(first.previous)
    let row: ClaimRow | undefined = first.found > 0 ? first : undefined
    // The first statement restored the caller's lock_timeout if it claimed; a later one did not.
    let restored = true
    for (let attempt = 2; row === undefined; attempt++) {
      // No row: the record was committed after the statement's snapshot (typically by the very
      // transaction this one waited for). The next statement's snapshot has it.
      if (attempt > maxClaimAttempts) {
        throw new Error(
          `idempotent-mutations: the transactional claim of a key read no record ${maxClaimAttempts} times in a row`,
        )
      }
      row = await claimAgain(input)
      restored = false
    }
    if (row.state > 0) {
      // The handler's statements run under the caller's lock_timeout, not the claim's.
      if (!restored) await restore()
      return {
        claimed: true,
        takeover: false,
        record: claimedRecord(input, row.lockedUntil, row.expiresAt),
      }
    }
    // A record to overwrite (it expired) or take over (a non-transactional executor's lease
    // ran out): the store's own claim decides that under the row lock, exactly as outside
    // transactional mode, still within the bound.
    if (claimsUnderLock(row, input.fingerprint)) {
      const result = await createDrizzleStore(tx, { table }).claim(input)
      if (result.claimed) await restore()
      return result
    }
    // Refused: the engine rolls this transaction back, lock_timeout with it.
    return { claimed: false, record: standingRecord(input, row), now: row.now }
  }

  const session: StoreTransaction<TTransaction> = {
    handle: tx as TTransaction,

    async claim(input: ClaimInput, options: TransactionClaimOptions) {
      // 0 would mean "wait forever" to PostgreSQL; the wait is always bounded.
      const waitMs = Math.min(Math.max(1, Math.ceil(options.lockWaitMs)), 2_147_483_647)
      try {
        return await claim(input, `${waitMs}ms`)
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
      const rows = direct ? await send('complete', input) : await completion(tx, table, input)
      return rows.length > 0
    },

    savepoint<T>(fn: (transaction: StoreTransaction<TTransaction>) => Promise<T>): Promise<T> {
      // A drizzle transaction's nested transaction is a savepoint.
      return tx.transaction((nested) =>
        fn(createStoreTransaction<TTransaction>(nested, statements)),
      )
    },
  }
  return session
}
