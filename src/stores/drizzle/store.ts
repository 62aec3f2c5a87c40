import { createHash } from 'node:crypto'
import { and, eq, type SQL, type SQLWrapper, sql } from 'drizzle-orm'
import {
  getTableConfig,
  type PgColumn,
  type PgDatabase,
  type PgQueryResultHKT,
} from 'drizzle-orm/pg-core'
import {
  type ClaimInput,
  type ClaimResult,
  type CompleteInput,
  claimedRecord,
  type IdempotencyRecord,
  type IdempotencyStore,
  type RecordStatus,
  type ReleaseInput,
  type StoreTransaction,
  type SweepOptions,
} from '../../store'
import { directStatementsOf } from './direct'
import { drizzleLoggerOf, pgliteClaimFunction, pgliteClientOf, pgliteFunction } from './pglite'
import { type IdempotencyTable, idempotencyKeys } from './table'
import {
  runDrizzleTransaction,
  type TransactionStatements,
  transactionStatements,
} from './transactional'

/**
 * Any drizzle PostgreSQL database: `drizzle(postgres.js)`, `drizzle(node-postgres)`,
 * `drizzle(PGlite)`, with or without a schema (the relational `query` API, whose type depends
 * on your schema, is the one part the store does not use). Pass the pool-level database, not a
 * transaction: a claim must commit on its own to be seen by concurrent retries.
 */
export type DrizzlePgDatabase = Omit<
  PgDatabase<PgQueryResultHKT, Record<string, unknown>>,
  'query' | '_'
>

export interface DrizzleStoreOptions {
  /**
   * The table records live in: `idempotencyKeys`, or your own from
   * `defineIdempotencyTable(name, schema)` (for example one in your drizzle-kit schema).
   * @default idempotencyKeys (table `idempotency_keys` in the default schema)
   */
  table?: IdempotencyTable | undefined
}

/**
 * The transaction type of a drizzle database: what `db.transaction(async (tx) => …)` hands its
 * callback, with your schema and driver in its type. Transactional mode gives it to handlers.
 */
export type DrizzleTransactionOf<TDatabase extends DrizzlePgDatabase> = Parameters<
  Parameters<TDatabase['transaction']>[0]
>[0]

/**
 * An {@link IdempotencyStore} over PostgreSQL through drizzle, plus table management.
 * `TTransaction` is your database's transaction type ({@link DrizzleTransactionOf}).
 */
export interface DrizzleStore<TTransaction = unknown> extends IdempotencyStore<TTransaction> {
  /** The table this store reads and writes. */
  readonly table: IdempotencyTable
  /**
   * Creates the table, its primary key and its `expires_at` index if they do not exist
   * (`CREATE … IF NOT EXISTS`, and `CREATE SCHEMA IF NOT EXISTS` for a table in a schema).
   * Safe to call from several processes at once. Skip it if drizzle-kit manages the table.
   */
  ensureTable(): Promise<void>
  /**
   * Runs `fn` in one transaction on the store's database (`db.transaction`), in which the
   * engine's transactional mode claims, lets the handler write, and records the outcome. See
   * `src/stores/drizzle/transactional.ts`.
   */
  transaction<T>(fn: (transaction: StoreTransaction<TTransaction>) => Promise<T>): Promise<T>
}

const expectedColumns = [
  'scope',
  'key',
  'fingerprint',
  'status',
  'response',
  'lease_token',
  'locked_until',
  'expires_at',
]

/** The DDL that creates `table` (one statement per entry), as `ensureTable` runs it. */
export function createTableStatements(table: IdempotencyTable = idempotencyKeys): string[] {
  const { name, schema } = getTableConfig(table)
  const quote = (identifier: string) => `"${identifier.replaceAll('"', '""')}"`
  const qualified = schema === undefined ? quote(name) : `${quote(schema)}.${quote(name)}`
  return [
    ...(schema === undefined ? [] : [`CREATE SCHEMA IF NOT EXISTS ${quote(schema)}`]),
    `CREATE TABLE IF NOT EXISTS ${qualified} (
  "scope" text NOT NULL,
  "key" text NOT NULL,
  "fingerprint" text NOT NULL,
  "status" text NOT NULL,
  "response" text,
  "lease_token" text NOT NULL,
  "locked_until" timestamp with time zone NOT NULL,
  "expires_at" timestamp with time zone NOT NULL,
  CONSTRAINT ${quote(`${name}_pkey`)} PRIMARY KEY ("scope", "key")
)`,
    `CREATE INDEX IF NOT EXISTS ${quote(`${name}_expires_at_idx`)} ON ${qualified} ("expires_at")`,
  ]
}

/**
 * The server's time for every comparison and every time written: the time the statement began
 * (`now()` is the time its transaction began, which in transactional mode can be a lock wait or
 * a handler ago). In a statement of its own the two are the same.
 */
const serverNow = sql.raw('statement_timestamp()')

// Epoch milliseconds computed by the server, so every app server reads the same clock.
// float8 comes back as a JavaScript number from every driver, and mapWith covers the rest.
export const epochMs = (value: SQL | PgColumn) =>
  sql<number>`floor(extract(epoch from ${value}) * 1000)::float8`.mapWith(Number)
// A completed record that still counts: what a replay reads (`prefix` is a table alias and dot).
const completedAndLive = (prefix: SQL) =>
  sql`(${prefix}status = 'completed' and ${prefix}expires_at > ${serverNow})`
export const millisecondsFrom = (milliseconds: SQLWrapper | number) =>
  sql`${serverNow} + ${milliseconds}::float8 * interval '1 millisecond'`

/**
 * `query` kept out of drizzle's query cache (its `cache` option, drizzle 0.44+): the store's
 * selects write (the claim) or must see what other statements wrote. Before 0.44 there is no
 * cache, and nothing to do.
 */
export function uncached<TQuery>(query: TQuery): TQuery {
  const cacheable = query as { $withCache?: (config: false) => TQuery }
  return typeof cacheable.$withCache === 'function' ? cacheable.$withCache(false) : query
}

/** The placeholders of the store's prepared statements, by the name of the value they take. */
export const p = {
  scope: sql.placeholder('scope'),
  key: sql.placeholder('key'),
  fingerprint: sql.placeholder('fingerprint'),
  leaseToken: sql.placeholder('leaseToken'),
  lockTimeoutMs: sql.placeholder('lockTimeoutMs'),
  ttlMs: sql.placeholder('ttlMs'),
  response: sql.placeholder('response'),
  batchSize: sql.placeholder('batchSize'),
  lockWait: sql.placeholder('lockWait'),
}

// How often a claim re-runs when it read nothing (see claimInPhases); each re-run sees a newer
// snapshot, so the second one practically always answers.
export const maxClaimAttempts = 10

/**
 * Records in PostgreSQL through drizzle (postgres.js, node-postgres or PGlite). Every method
 * is one prepared statement, except a claim that must overwrite or take a record over, which is
 * two (see claimInPhases); on PGlite the claim's statements and the completion are calls of
 * session functions (see ./pglite.ts). Times come from the database's clock; commits are the
 * database's normal durable ones.
 *
 * ```ts
 * const store = createDrizzleStore(db)
 * await store.ensureTable()
 * ```
 */
export function createDrizzleStore<TDatabase extends DrizzlePgDatabase>(
  database: TDatabase,
  options: DrizzleStoreOptions = {},
): DrizzleStore<DrizzleTransactionOf<TDatabase>> {
  if (database === null || typeof database !== 'object' || typeof database.select !== 'function') {
    throw new TypeError(
      'idempotent-mutations: createDrizzleStore needs a drizzle PostgreSQL database, e.g. drizzle(pool)',
    )
  }
  // `withReplicas(primary, replicas)` sends selects (the claim is one, with an INSERT in it, and
  // so is the sweep) to a replica, which cannot write and may lag: the store uses the primary.
  const db = ((database as { $primary?: TDatabase }).$primary ?? database) as TDatabase
  const table = options.table ?? idempotencyKeys
  const config = getTableConfig(table)
  const columnNames = config.columns.map((column) => column.name)
  if (expectedColumns.some((name) => !columnNames.includes(name))) {
    throw new TypeError(
      'idempotent-mutations: the `table` option must come from defineIdempotencyTable() (or be idempotencyKeys)',
    )
  }
  // node-postgres keeps named statements per connection and refuses one name for two texts,
  // so each table gets its own names.
  const tag = createHash('sha256')
    .update(`v1:${config.schema ?? ''}.${config.name}`)
    .digest('hex')
    .slice(0, 12)
  const statementName = (kind: string) => `idempotent_mutations_${kind}_${tag}`

  // Drizzle sends a placeholder once per use, so the scope and key, compared several times each,
  // would travel as that many parameters for the driver to type and encode on every claim.
  // After their first use (parameters $1 and $2, checked below) they are referred to by number.
  const again = { scope: sql.raw('$1'), key: sql.raw('$2') }
  // A claim is one statement, rarely two: the first phase (insertOrReadQuery), and the claim
  // under the row lock (lockedClaimQuery) for a record to overwrite or take over.
  const claimQuery = lockedClaimQuery(db, table, p, again)
  // On PGlite the claim's statements and the completion run as session functions (see
  // ./pglite.ts); on postgres.js and node-postgres they skip drizzle's query path (see
  // ./direct.ts); elsewhere they are drizzle's prepared statements.
  const pglite = pgliteClientOf(db)
  const logger = drizzleLoggerOf(db)
  const direct = pglite ? undefined : directStatementsOf(db, logger)
  const claimStatementOf = (kind: string, query: ReturnType<typeof insertOrReadQuery>) => {
    const [first, second] = query.toSQL().params
    if (first !== p.scope || second !== p.key) {
      throw new Error(
        'idempotent-mutations: a claim statement does not start with the scope and key parameters it refers to as $1 and $2',
      )
    }
    const name = statementName(kind)
    const statement = {
      name,
      ...query.toSQL(),
      pglite: pglite && pgliteClaimFunction(pglite, logger, name, query.toSQL()),
    }
    const sent = statement.pglite || direct?.(name, statement)
    if (sent) {
      return {
        statement,
        run: async (values: Record<string, unknown>) => claimRowOf((await sent.run(values))[0]),
      }
    }
    const prepared = query.prepare(name)
    return {
      statement,
      run: async (values: Record<string, unknown>): Promise<ClaimRow | undefined> =>
        (await prepared.execute(values))[0],
    }
  }
  const firstPhaseQuery = insertOrReadQuery(db, table, p, again)
  const insertOrRead = claimStatementOf('insert_or_read', firstPhaseQuery)
  const underLock = claimStatementOf('claim', claimQuery)

  const completeQuery = completionQuery(db, table, p)
  const complete = {
    name: statementName('complete'),
    ...completeQuery.toSQL(),
    pglite:
      pglite &&
      pgliteFunction(
        pglite,
        logger,
        statementName('complete'),
        completeQuery.toSQL(),
        'table(key text)',
        (text) => `begin\n  return query ${text};\nend`,
      ),
  }
  const completeSent = complete.pglite || direct?.(complete.name, complete)
  const completePrepared = completeSent ? undefined : completeQuery.prepare(complete.name)

  const current = leaseHeld(table, p)
  const releaseQuery = db.delete(table).where(current).returning({ key: table.key })
  // On postgres.js and node-postgres past drizzle as well: through drizzle, a query cache would
  // be told of the delete (a round trip to it) and could fail a release that already happened.
  const releaseSent = direct?.(statementName('release'), releaseQuery.toSQL())
  const releasePrepared = releaseSent ? undefined : releaseQuery.prepare(statementName('release'))

  const getStatement = uncached(
    db
      .select(recordFields(sql`${table}.`))
      .from(table)
      .where(and(eq(table.scope, p.scope), eq(table.key, p.key))),
  ).prepare(statementName('get'))

  // Locks the batch with SKIP LOCKED so a sweep never waits on (or blocks) a claim of the same
  // row, and re-checks expiry in the DELETE itself.
  const swept = db.$with('swept', {}).as(sql`
    delete from ${table}
    where (scope, key) in (
      select scope, key from ${table}
      where expires_at <= ${serverNow}
      limit ${p.batchSize}
      for update skip locked
    ) and expires_at <= ${serverNow}
    returning 1`)
  const sweepStatement = uncached(
    db
      .with(swept)
      .select({ deleted: sql<number>`count(*)::int`.mapWith(Number) })
      .from(sql`swept`),
  ).prepare(statementName('sweep'))

  // Transactional mode's statements, built on first use (see ./transactional.ts).
  let forTransactions: TransactionStatements | undefined
  const transactionStatementsOf = () => {
    forTransactions ??= transactionStatements(db, table, statementName, {
      insertOrRead: insertOrRead.statement,
      underLock: underLock.statement,
      complete,
      pglite: pglite && { client: pglite, logger },
    })
    return forTransactions
  }

  return {
    table,

    transaction: (fn) => runDrizzleTransaction(db, transactionStatementsOf(), fn),

    async ensureTable() {
      for (const statement of createTableStatements(table)) {
        try {
          await db.execute(sql.raw(statement))
        } catch (error) {
          // Two processes creating the same table or schema at once: one of them loses the
          // race on the catalog, and the object exists either way.
          if (!['23505', '42P07', '42P06', '42710'].includes(postgresErrorCode(error) ?? '')) {
            throw error
          }
        }
      }
    },

    async claim(input: ClaimInput): Promise<ClaimResult> {
      const values = placeholderValues(input)
      return (
        await claimInPhases(
          input,
          () => insertOrRead.run(values),
          () => underLock.run(values),
        )
      ).result
    },

    async complete(input: CompleteInput): Promise<boolean> {
      const values = placeholderValues(input)
      const rows = completeSent
        ? await completeSent.run(values)
        : await completePrepared!.execute(values)
      return rows.length > 0
    },

    async release(input: ReleaseInput): Promise<boolean> {
      const values = placeholderValues(input)
      const rows = releaseSent
        ? await releaseSent.run(values)
        : await releasePrepared!.execute(values)
      return rows.length > 0
    },

    async get(scope: string, key: string): Promise<IdempotencyRecord | undefined> {
      const [row] = await getStatement.execute({ scope, key })
      return row && toRecord(row)
    },

    async sweep(sweepOptions: SweepOptions = {}): Promise<number> {
      const batchSize = sweepOptions.batchSize ?? 1000
      const limit = sweepOptions.limit ?? Number.POSITIVE_INFINITY
      if (!Number.isInteger(batchSize) || batchSize < 1) {
        throw new TypeError(
          `idempotent-mutations: sweep's batchSize must be a positive integer (got ${batchSize})`,
        )
      }
      if (!(Number.isInteger(limit) || limit === Number.POSITIVE_INFINITY) || limit < 0) {
        throw new TypeError(
          `idempotent-mutations: sweep's limit must be a non-negative integer or Infinity (got ${limit})`,
        )
      }
      let deleted = 0
      while (deleted < limit) {
        const size = Math.min(batchSize, limit - deleted)
        const [row] = await sweepStatement.execute({ batchSize: size })
        const count = row?.deleted ?? 0
        deleted += count
        // A short batch means nothing expired is left (or the rest is locked by claims).
        if (count < size) break
      }
      return deleted
    },
  }
}

/**
 * The claim under the row lock: the second phase of a claim, for a record the first
 * (insertOrReadQuery) read as expired, or as in progress under a lease that ran out with the
 * same payload (`claimsUnderLock`, which must agree with this statement's WHERE). It decides
 * overwrite and takeover atomically. A record's life (times from the server's clock):
 *
 *   (absent) ──claim──▶ in_progress ──complete(token)──▶ completed ──expires_at──▶ (absent)
 *                        │    │                                                  ▲
 *                        │    └──release(token)──▶ (absent)                       │
 *                        └──locked_until passes, same fingerprint──▶ claim = takeover
 *
 * INSERT … ON CONFLICT DO UPDATE … WHERE decides atomically under the row lock:
 * - no row: the INSERT writes a fresh in_progress record (claimed).
 * - expires_at passed: the record no longer counts, so it is overwritten (claimed, not a
 *   takeover: `prior` below reads it as expired).
 * - in_progress, lease over, same fingerprint: its executor died; take it over with a new
 *   token, which fences the old executor's late complete/release off.
 * - anything else (completed, valid lease, expired lease with another payload): the WHERE
 *   is false, nothing changes, `claimed` is empty, and the outer SELECT returns the row so
 *   the claim answers (replay, 409 or 422) without another statement.
 * `prior` reads the statement's snapshot, which still holds the row as it was before this
 * statement, so it tells a takeover from a claim of an absent or expired key.
 *
 * A completed record takes no lock here either (the first phase read it as something else,
 * and another claim completed it since). A record that is completed and not expired in this
 * statement's snapshot cannot change under it (claim, complete, release and sweep all leave such a record
 * alone), so the INSERT is skipped (`done`) and the snapshot's row is returned as it is.
 * Without this, ON CONFLICT DO UPDATE (and FOR SHARE) would lock the row even when nothing is
 * updated: a row lock is a WAL write, which would make a claim that meets a record completed
 * between the two phases wait for a durable commit. (Replays themselves never come here: the
 * first phase answers them.)
 *
 * READ COMMITTED corners, when another claim commits while this statement runs:
 * - it changed the row after this statement's snapshot (took it over, completed it): a plain
 *   SELECT would return the snapshot's stale version. `for share` makes Postgres fetch the
 *   row's latest version instead (the ON CONFLICT branch already holds its lock, so this
 *   never waits), so every refused claimer sees the winner's record. A row that was not yet
 *   completed in the snapshot but is now fails the `for share` branch's re-check, and the
 *   snapshot branch does not see it completed: no row, and the claim starts again
 *   ({@link claimInPhases}).
 * - it inserted the row after the snapshot: ON CONFLICT sees it, the SELECT cannot, and the
 *   statement returns no row; the claim starts again.
 */
export function lockedClaimQuery(
  db: DrizzlePgDatabase,
  table: IdempotencyTable,
  values: ClaimValues,
  again: Pick<ClaimValues, 'scope' | 'key'> = values,
) {
  // The standing record when it is completed and live, read once: it both keeps the INSERT
  // from running and is the replay's answer.
  const done = db.$with('done', {}).as(sql`
    select fingerprint, status, response, lease_token, locked_until, expires_at
    from ${table}
    where scope = ${values.scope} and key = ${values.key} and ${completedAndLive(sql``)}`)
  // Its WHERE takes the cases claimsUnderLock sends here: keep the two in step.
  const claimed = db.$with('claimed', {}).as(sql`
    insert into ${table} as t
      (scope, key, fingerprint, status, response, lease_token, locked_until, expires_at)
    select ${again.scope}, ${again.key}, ${values.fingerprint}, 'in_progress', null, ${values.leaseToken},
      ${millisecondsFrom(values.lockTimeoutMs)}, ${millisecondsFrom(values.ttlMs)}
    where not exists (select 1 from done)
    on conflict (scope, key) do update set
      fingerprint = excluded.fingerprint, status = excluded.status, response = null,
      lease_token = excluded.lease_token, locked_until = excluded.locked_until,
      expires_at = excluded.expires_at
    where t.expires_at <= ${serverNow}
      or (t.status = 'in_progress' and t.locked_until <= ${serverNow} and t.fingerprint = excluded.fingerprint)
    returning t.locked_until, t.expires_at,
      exists (select 1 from ${table} as prior
        where prior.scope = ${again.scope} and prior.key = ${again.key} and prior.expires_at > ${serverNow}
      ) as takeover`)
  // The claim returns only what the engine does not already know: the caller's scope and key
  // are the row's, and a claimed row also carries the caller's fingerprint and lease token,
  // status in_progress and no response, so it returns just its times.
  // `state`: 0 the standing record refused the claim, 1 claimed, 2 claimed by takeover.
  // The three branches exclude each other, so at most one row comes back; `limit 1` stops the
  // scan there, and a record completed since the first phase (the second branch) is not read
  // a second time.
  // Never from a cache in front of drizzle: this select has an INSERT in it.
  return uncached(
    db
      .with(done, claimed)
      .select(claimRowFields)
      .from(sql`(
      select case when takeover then 2 else 1 end as state, null::text as fingerprint,
        null::text as status, null::text as response, null::text as lease_token,
        locked_until, expires_at
      from claimed
      union all
      select 0, fingerprint, status, response, lease_token, locked_until, expires_at
      from done
      where not exists (select 1 from claimed)
      union all
      select 0, fingerprint, status, response, lease_token, locked_until, expires_at
      from (
        select * from ${table}
        where scope = ${again.scope} and key = ${again.key} and not exists (select 1 from claimed)
          and not ${completedAndLive(sql``)}
        for share
      ) as standing
      limit 1
    ) as r`),
  )
}

/**
 * What both claim statements return (`insertOrReadQuery`, `lockedClaimQuery`): `state` 0 when a
 * standing record refused the claim (its fields follow), 1 claimed, 2 claimed by takeover (the
 * claimed record's times only), and the server's `now`.
 */
export type ClaimRow = Omit<IdempotencyRecord, 'scope' | 'key'> & { state: number; now: number }

/** The columns of a {@link ClaimRow}, selected from the claim statements' `r`. */
export const claimRowFields = {
  // A number even from a driver that hands integers back as text.
  state: sql<number>`r.state`.mapWith(Number),
  fingerprint: sql<string>`r.fingerprint`,
  status: sql<RecordStatus>`r.status`,
  response: sql<string | null>`r.response`,
  leaseToken: sql<string>`r.lease_token`,
  lockedUntil: epochMs(sql`r.locked_until`),
  expiresAt: epochMs(sql`r.expires_at`),
  now: epochMs(serverNow),
}

/** The columns of a {@link ClaimRow}, in the order the claim statements select them. */
export const claimRowColumns = Object.keys(claimRowFields) as (keyof ClaimRow)[]

/** A claim row as a direct statement returns it (an array), or undefined for no row. */
export function claimRowOf(row: unknown[] | undefined): ClaimRow | undefined {
  if (row === undefined) return undefined
  const [state, fingerprint, status, response, leaseToken, lockedUntil, expiresAt, now] = row
  return {
    state: Number(state),
    fingerprint: fingerprint as string,
    status: status as RecordStatus,
    response: response as string | null,
    leaseToken: leaseToken as string,
    lockedUntil: Number(lockedUntil),
    expiresAt: Number(expiresAt),
    now: Number(now),
  }
}

/** The record of `at`'s scope and key with `row`'s fields (a refused claim's standing record). */
export function standingRecord(
  at: Pick<IdempotencyRecord, 'scope' | 'key'>,
  row: Omit<IdempotencyRecord, 'scope' | 'key'>,
): IdempotencyRecord {
  return {
    scope: at.scope,
    key: at.key,
    fingerprint: row.fingerprint,
    status: row.status,
    response: row.response,
    leaseToken: row.leaseToken,
    lockedUntil: row.lockedUntil,
    expiresAt: row.expiresAt,
  }
}

/**
 * Whether a standing record the first phase read may be claimed after all, which only the
 * claim under the row lock decides: it expired, or it is in progress, its lease is over and
 * the payload is the same (a takeover). Times are whole milliseconds, floored, from one
 * statement's clock: a record that SQL holds still live by less than a millisecond reads as
 * over here, which costs the second statement and changes no answer. Keep it in step with the
 * ON CONFLICT … WHERE of {@link lockedClaimQuery}: a case only that WHERE allows would never be
 * claimed.
 */
export function claimsUnderLock(row: ClaimRow, fingerprint: string): boolean {
  return (
    row.expiresAt <= row.now ||
    (row.status === 'in_progress' && row.lockedUntil <= row.now && row.fingerprint === fingerprint)
  )
}

/**
 * A claim, in phases: `insertOrRead(attempt)` (insertOrReadQuery) answers it, except for a
 * record to overwrite or take over, which `underLock()` (lockedClaimQuery) decides; a statement
 * that read no row (a concurrent claim inserted the record after its snapshot) starts the claim
 * again, and the next snapshot has the record. `attempt` and `underLock` in the answer say
 * which statement gave it (transactional mode restores a setting unless the first one did).
 */
export async function claimInPhases(
  input: ClaimInput,
  insertOrRead: (attempt: number) => Promise<ClaimRow | undefined>,
  underLock: () => Promise<ClaimRow | undefined>,
): Promise<{ result: ClaimResult; attempt: number; underLock: boolean }> {
  for (let attempt = 1; attempt <= maxClaimAttempts; attempt++) {
    let row = await insertOrRead(attempt)
    const locked = row?.state === 0 && claimsUnderLock(row, input.fingerprint)
    if (locked) row = await underLock()
    if (row === undefined) continue
    const result: ClaimResult =
      row.state > 0
        ? {
            claimed: true,
            takeover: row.state > 1,
            record: claimedRecord(input, row.lockedUntil, row.expiresAt),
          }
        : { claimed: false, record: standingRecord(input, row), now: row.now }
    return { result, attempt, underLock: locked }
  }
  throw new Error(
    `idempotent-mutations: the claim of a key read no record ${maxClaimAttempts} times in a row (constant concurrent release and claim of one key)`,
  )
}

/** The record is in progress under `values.leaseToken`: what completion and release require. */
function leaseHeld(
  table: IdempotencyTable,
  values: Record<'scope' | 'key' | 'leaseToken', SQLWrapper | string>,
) {
  return and(
    sql`${table.scope} = ${values.scope}`,
    sql`${table.key} = ${values.key}`,
    sql`${table.status} = 'in_progress'`,
    sql`${table.leaseToken} = ${values.leaseToken}`,
  )
}

/**
 * The completion: the record, in progress under the caller's lease, becomes completed with its
 * response and `expires_at = now + ttl`, the statement's own time (in transactional mode a long
 * handler does not shorten the replay window). Returns the key when it completed.
 */
export function completionQuery(
  db: DrizzlePgDatabase,
  table: IdempotencyTable,
  values: { [Name in keyof CompleteInput]: SQLWrapper | CompleteInput[Name] },
) {
  return db
    .update(table)
    .set({
      status: sql`'completed'`,
      response: sql`${values.response}`,
      expiresAt: millisecondsFrom(values.ttlMs),
    })
    .where(leaseHeld(table, values))
    .returning({ key: table.key })
}

/**
 * A store call's input as the values of its statement's placeholders, which are named after the
 * input's fields (see `p`): no copy per call.
 */
const placeholderValues = (input: ClaimInput | CompleteInput | ReleaseInput) =>
  input as unknown as Record<string, unknown>

/** A claim's inputs as SQL: placeholders (prepared statements) or the values themselves. */
export type ClaimValues = {
  [Name in keyof Omit<ClaimInput, 'lockTimeoutMs' | 'ttlMs'>]: SQLWrapper | string
} & { lockTimeoutMs: SQLWrapper | number; ttlMs: SQLWrapper | number }

/**
 * The first phase of a claim, and usually the whole of it: insert a fresh in-progress record,
 * or read the record that stands. ON CONFLICT DO NOTHING takes no row lock and writes nothing
 * when the key exists, so a replay, a 409 and a 422 cost one read-only statement; it still
 * waits for a concurrent uncommitted insert of the key (it must know whether the conflict is
 * real), which transactional mode's wait is built on. Returns a {@link ClaimRow}: state 1
 * (claimed) or 0 with the standing record as this statement's snapshot holds it (no row when a
 * concurrent claim inserted it after the snapshot; the caller runs the claim again).
 *
 * A standing record changed by another claim after the snapshot (completed, released) is
 * answered as the snapshot holds it: a duplicate that raced the completion gets 409 and its
 * retry replays. `values` are placeholders or values; `again`, if given, refers to the scope
 * and key a second time (the store's `$1` and `$2`).
 */
export function insertOrReadQuery(
  db: DrizzlePgDatabase,
  table: IdempotencyTable,
  values: ClaimValues,
  again: Pick<ClaimValues, 'scope' | 'key'> = values,
) {
  // Never from a drizzle query cache: it has an INSERT in it.
  return uncached(
    db
      .with(insertedRecord(db, table, values))
      .select(claimRowFields)
      .from(sql`(${insertedOrStanding(table, again)}) as r`),
  )
}

/**
 * The `inserted` CTE of {@link insertOrReadQuery}: the insert of a fresh in-progress record,
 * which inserts nothing when the key exists. With `from`, its one row is selected from that
 * (a CTE the insert must then run after) instead of being a VALUES list.
 */
export function insertedRecord(
  db: DrizzlePgDatabase,
  table: IdempotencyTable,
  values: ClaimValues,
  from?: SQL,
) {
  const row = sql`${values.scope}, ${values.key}, ${values.fingerprint}, 'in_progress', null,
      ${values.leaseToken}, ${millisecondsFrom(values.lockTimeoutMs)},
      ${millisecondsFrom(values.ttlMs)}`
  return db.$with('inserted', {}).as(sql`
    insert into ${table}
      (scope, key, fingerprint, status, response, lease_token, locked_until, expires_at)
    ${from === undefined ? sql`values (${row})` : sql`select ${row} from ${from}`}
    on conflict (scope, key) do nothing
    returning locked_until, expires_at`)
}

/**
 * The rows of a {@link ClaimRow} from the `inserted` CTE: the inserted record (state 1), else
 * the standing one (state 0), as this statement's snapshot holds it.
 */
export function insertedOrStanding(
  table: IdempotencyTable,
  key: Pick<ClaimValues, 'scope' | 'key'>,
) {
  return sql`
      select 1 as state, null::text as fingerprint, null::text as status, null::text as response,
        null::text as lease_token, locked_until, expires_at
      from inserted
      union all
      select 0, fingerprint, status, response, lease_token, locked_until, expires_at
      from ${table}
      where scope = ${key.scope} and key = ${key.key} and not exists (select 1 from inserted)`
}

/** The record's columns as selected from `prefix` (a table or the claim's `r`). */
export function recordFields(prefix: SQL) {
  return {
    scope: sql<string>`${prefix}scope`,
    key: sql<string>`${prefix}key`,
    fingerprint: sql<string>`${prefix}fingerprint`,
    status: sql<RecordStatus>`${prefix}status`,
    response: sql<string | null>`${prefix}response`,
    leaseToken: sql<string>`${prefix}lease_token`,
    lockedUntil: epochMs(sql`${prefix}locked_until`),
    expiresAt: epochMs(sql`${prefix}expires_at`),
  }
}

export function toRecord(row: IdempotencyRecord): IdempotencyRecord {
  return standingRecord(row, row)
}

/** The SQLSTATE of a driver error, wherever drizzle or the driver put it. */
export function postgresErrorCode(error: unknown): string | undefined {
  for (let current = error, depth = 0; current && depth < 5; depth++) {
    const code = (current as { code?: unknown }).code
    if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return code
    current = (current as { cause?: unknown }).cause
  }
  return undefined
}
