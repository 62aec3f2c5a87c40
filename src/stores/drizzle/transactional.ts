import { type SQLWrapper, sql } from 'drizzle-orm'
import type {
  ClaimInput,
  CompleteInput,
  StoreTransaction,
  TransactionClaimOptions,
  TransactionClaimResult,
} from '../../store'
import { directStatementsFor } from './direct'
import {
  drizzleLoggerOf,
  forgetFunctionsOf,
  isUndefinedFunction,
  type PGliteClient,
  type PGliteFunction,
  type PGliteTransaction,
  pgliteClaimFunction,
  type QueryLogger,
} from './pglite'
import {
  type ClaimValues,
  claimInPhases,
  claimRowColumns,
  claimRowFields,
  claimRowOf,
  completionQuery,
  type DrizzlePgDatabase,
  insertedOrStanding,
  insertedRecord,
  insertOrReadQuery,
  lockedClaimQuery,
  p,
  postgresErrorCode,
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
 * (a unique-index wait) until the first transaction ends: after a commit its claim runs once
 * more (its snapshot predates the commit) and replays the completed record; after a rollback (crash, unexpected error) the key is free and it claims
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
  // Never from a drizzle query cache: it has an INSERT in it and sets a setting. `found` and
  // `previous` follow the claim row's columns (read by position on the direct path).
  return uncached(
    db
      .with(swap, insertedRecord(db, table, values, sql`swap`))
      .select({
        ...claimRowFields,
        found: sql<number>`(r.state is not null)::int`.mapWith(Number),
        previous: sql<string>`swap.previous`,
        restored: sql`case when r.state = 1 then set_config('lock_timeout', swap.previous, true) end`,
      })
      .from(sql`swap left join lateral (${insertedOrStanding(table, boundedAgain)}) as r on true`),
  )
}

// The scope and key, after their first use as parameters $2 and $3 (`lockWait` is $1; checked
// where the statement is built), referred to by number rather than sent twice.
const boundedAgain = { scope: sql.raw('$2'), key: sql.raw('$3') }

const setLockTimeoutText = "select set_config('lock_timeout', $1, true)"

/**
 * A statement's text and parameters (drizzle's `toSQL()`) and its prepared name; on PGlite, the
 * `pg_temp` function that runs it (except `setLockTimeout`, too small to need one).
 */
export interface Statement {
  name: string
  sql: string
  params: unknown[]
  pglite?: PGliteFunction | undefined
}

/**
 * What transactional mode sends, built once per store with placeholders. On postgres.js and
 * node-postgres each transaction sends these texts to its own connection through the driver, as
 * prepared statements (see ./direct.ts); on PGlite it calls them as `pg_temp` functions (see
 * ./pglite.ts), which keep their plans: drizzle would render each statement's SQL anew for every
 * transaction, and PGlite would parse and plan it anew. Other drivers go through drizzle, per
 * transaction. `insertOrRead` and `underLock` are the store's own claim statements.
 */
export interface TransactionStatements {
  table: IdempotencyTable
  boundedClaim: Statement
  insertOrRead: Statement
  underLock: Statement
  complete: Statement
  setLockTimeout: Statement
  /** On PGlite: creates the functions, before a transaction begins. */
  ensureFunctions?: (() => Promise<void>) | undefined
  /** On PGlite: forgets every function of the instance, after a call found one dropped. */
  forgetFunctions?: (() => void) | undefined
}

export function transactionStatements(
  db: DrizzlePgDatabase,
  table: IdempotencyTable,
  name: (kind: string) => string,
  shared: Pick<TransactionStatements, 'insertOrRead' | 'underLock' | 'complete'> & {
    pglite: { client: PGliteClient; logger: QueryLogger | undefined } | undefined
  },
): TransactionStatements {
  const { pglite, ...claims } = shared
  const boundedClaim: Statement = {
    name: name('tx_claim'),
    ...boundedInsertOrRead(db, table, p).toSQL(),
  }
  const [, scope, key] = boundedClaim.params
  if (scope !== p.scope || key !== p.key) {
    throw new Error(
      'idempotent-mutations: the transactional claim does not send the scope and key as the parameters it refers to as $2 and $3',
    )
  }
  if (pglite) {
    boundedClaim.pglite = pgliteClaimFunction(
      pglite.client,
      pglite.logger,
      boundedClaim.name,
      boundedClaim,
      ', found integer, previous text, restored text',
    )
  }
  const functions = [claims.insertOrRead, claims.underLock, boundedClaim, claims.complete].flatMap(
    (statement) => statement.pglite ?? [],
  )
  return {
    table,
    ...claims,
    boundedClaim,
    setLockTimeout: {
      name: name('tx_lock_timeout'),
      sql: setLockTimeoutText,
      params: [p.lockWait],
    },
    ensureFunctions: pglite
      ? async () => {
          await Promise.all(functions.map((fn) => fn.ensure()))
        }
      : undefined,
    forgetFunctions: pglite ? () => forgetFunctionsOf(pglite.client) : undefined,
  }
}

/** `db.transaction(fn)` with a {@link StoreTransaction} over the transaction. */
export function runDrizzleTransaction<TTransaction, T>(
  db: DrizzlePgDatabase,
  statements: TransactionStatements,
  fn: (transaction: StoreTransaction<TTransaction>) => Promise<T>,
): Promise<T> {
  const begin = () => {
    const pool = nodePostgresPoolOf(db)
    if (pool) return onPoolClient(db, pool, statements, fn)
    let detach: (() => void) | undefined
    const life = transactionLife()
    const running = db.transaction((tx) => {
      detach = listenForConnectionErrors(connectionOf(tx))
      return fn(createStoreTransaction<TTransaction>(tx, statements, life))
    })
    running.then(life.end, life.end)
    return running.finally(() => detach?.())
  }
  // On PGlite the functions must exist before the transaction: inside it, the instance that
  // would create them waits for the transaction to end.
  return statements.ensureFunctions ? statements.ensureFunctions().then(begin) : begin()
}

/** A node-postgres pool behind a drizzle database, if that is what it runs on. */
interface NodePostgresPool {
  connect(): Promise<{ release(error?: Error | boolean): void }>
}

function nodePostgresPoolOf(db: DrizzlePgDatabase): NodePostgresPool | undefined {
  const client = connectionOf(db) as Record<string, unknown> | null | undefined
  return typeof client === 'object' &&
    client !== null &&
    typeof client.connect === 'function' &&
    typeof client.query === 'function' &&
    'idleCount' in client &&
    'totalCount' in client
    ? (client as unknown as NodePostgresPool)
    : undefined
}

/**
 * On a node-postgres pool the client is checked out here, not by drizzle, so that it has its
 * error listener from the start: drizzle's own checkout sends BEGIN to a client that nobody
 * listens to (a connection lost then, a crash-stop of the database, emits an uncaught `error`),
 * and a failed BEGIN never gives that client back. The transaction runs on a copy of the
 * database's session bound to the client (its logger, schema and cache kept), and the client
 * goes back to the pool however it ended (one whose connection is gone is dropped by the pool).
 */
async function onPoolClient<TTransaction, T>(
  db: DrizzlePgDatabase,
  pool: NodePostgresPool,
  statements: TransactionStatements,
  fn: (transaction: StoreTransaction<TTransaction>) => Promise<T>,
): Promise<T> {
  const client = await pool.connect()
  const detach = listenForConnectionErrors(client)
  try {
    const session = (db as unknown as { session: object }).session
    const onClient = Object.assign(
      Object.create(Object.getPrototypeOf(session) as object),
      session,
      {
        client,
      },
    ) as { transaction(run: (tx: DrizzlePgDatabase) => Promise<T>): Promise<T> }
    return await onClient.transaction((tx) =>
      fn(createStoreTransaction<TTransaction>(tx, statements, transactionLife())),
    )
  } finally {
    client.release()
    detach?.()
  }
}

/**
 * A node-postgres pool client checked out for a transaction has no `error` listener (the pool
 * removes its own while the client is out), so a connection that resets while the transaction
 * waits for the handler would emit an uncaught `error` and end the process. This listener stays
 * for the transaction's life and goes once it has ended and the client is back in the pool; the
 * error itself reaches the transaction through its next statement, which fails.
 */
function listenForConnectionErrors(client: unknown): (() => void) | undefined {
  const emitter = client as {
    on?: unknown
    removeListener?: (event: 'error', listener: () => void) => void
    query?: unknown
  } | null
  if (
    typeof emitter !== 'object' ||
    emitter === null ||
    typeof emitter.on !== 'function' ||
    typeof emitter.removeListener !== 'function' ||
    typeof emitter.query !== 'function'
  ) {
    return undefined
  }
  const ignore = () => {}
  ;(emitter.on as (event: 'error', listener: () => void) => void).call(emitter, 'error', ignore)
  return () => emitter.removeListener!('error', ignore)
}

/** Whether the driver has settled a transaction (committed, rolled back, or given up). */
interface TransactionLife {
  ended: boolean
  /** Resolves when it ends. */
  over: Promise<void>
  end(): void
}

function transactionLife(): TransactionLife {
  let end!: () => void
  const over = new Promise<void>((resolve) => {
    end = resolve
  })
  const life: TransactionLife = {
    ended: false,
    over,
    end: () => {
      life.ended = true
      end()
    },
  }
  return life
}

/** What a statement through `tx` rejects with once its transaction has ended. */
export class TransactionClosedError extends Error {
  override name = 'TransactionClosedError'
  readonly code = 'TRANSACTION_CLOSED'
  constructor() {
    super(
      'idempotent-mutations: this transaction has ended (its connection closed, or it was committed or rolled back); the statement was not sent',
    )
  }
}

/** A postgres.js query that was never sent: it rejects when awaited, and only then. */
function refusedQuery(): PromiseLike<never> & Record<string, unknown> {
  const refused = () => Promise.reject(new TransactionClosedError())
  const query: PromiseLike<never> & Record<string, unknown> = {
    // biome-ignore lint/suspicious/noThenProperty: a thenable, as the driver's queries are
    then: (onFulfilled, onRejected) => refused().then(onFulfilled, onRejected),
    catch: (onRejected: (error: unknown) => unknown) => refused().catch(onRejected),
    finally: (onFinally: () => void) => refused().finally(onFinally),
  }
  // The modifiers drizzle and users chain before awaiting.
  for (const modifier of ['values', 'raw', 'execute', 'simple', 'describe']) {
    query[modifier] = () => query
  }
  return query
}

/**
 * A postgres.js query of a transaction that also settles when the transaction ends: postgres.js
 * never settles a statement it queued on a transaction's connection (while an earlier one was
 * still being described) if that connection closes, so without this a handler awaiting it would
 * wait for ever. It then rejects with {@link TransactionClosedError}.
 */
function endingWith<Q extends object>(query: Q, life: TransactionLife): Q {
  let settled: Promise<unknown> | undefined
  const raced = () => {
    settled ??= Promise.race([
      query as unknown as PromiseLike<unknown>,
      life.over.then(() => Promise.reject(new TransactionClosedError())),
    ])
    return settled
  }
  const proxy: Q = new Proxy(query, {
    get: (target, property) => {
      if (property === 'then') {
        return (onFulfilled?: (v: unknown) => unknown, onRejected?: (e: unknown) => unknown) =>
          raced().then(onFulfilled, onRejected)
      }
      if (property === 'catch')
        return (onRejected: (e: unknown) => unknown) => raced().catch(onRejected)
      if (property === 'finally') return (onFinally: () => void) => raced().finally(onFinally)
      const value = Reflect.get(target, property, target)
      if (typeof value !== 'function') return value
      // The modifiers drizzle chains (`values()`, `raw()`, ...) return the query itself.
      return (...args: unknown[]) => {
        const result = Reflect.apply(value, target, args)
        return result === target ? proxy : result
      }
    },
  })
  return proxy
}

/**
 * postgres.js: the transaction's `sql` (drizzle's `tx.session.client`) made to refuse statements
 * once the transaction has ended, and to settle those still pending when it ends. postgres.js settles `sql.begin()` by itself when the
 * connection closes, but the transaction's `sql` still sends to that connection: with its socket
 * gone, a statement (the handler's, through `tx`, after the connection was lost) makes
 * postgres.js throw `Cannot read properties of null (reading 'write')` from a timer, an uncaught
 * exception; after a reconnect it would run on the new session, outside any transaction.
 */
function guardPostgresJsTransaction(tx: DrizzlePgDatabase, life: TransactionLife): void {
  const session = (tx as { session?: { client?: unknown } }).session
  const client = session?.client as
    | (((...args: unknown[]) => unknown) & Record<string | symbol, unknown>)
    | undefined
  if (
    typeof client !== 'function' ||
    typeof client.unsafe !== 'function' ||
    typeof client.savepoint !== 'function'
  ) {
    return
  }
  const sent = (query: unknown) =>
    typeof query === 'object' && query !== null ? endingWith(query, life) : query
  session!.client = new Proxy(client, {
    apply: (target, thisArg, args) =>
      life.ended ? refusedQuery() : sent(Reflect.apply(target, thisArg, args)),
    get: (target, property, receiver) => {
      const value = Reflect.get(target, property, receiver)
      if (property === 'unsafe' || property === 'file') {
        return (...args: unknown[]) =>
          life.ended ? refusedQuery() : sent((value as (...a: unknown[]) => unknown)(...args))
      }
      if (property === 'savepoint') {
        return (...args: unknown[]) =>
          life.ended
            ? Promise.reject(new TransactionClosedError())
            : (value as (...a: unknown[]) => unknown)(...args)
      }
      return value
    },
  })
}

/** The PGlite transaction behind a drizzle transaction on PGlite. */
function pgliteTransactionOf(tx: DrizzlePgDatabase): PGliteTransaction | undefined {
  const client = connectionOf(tx) as Record<string, unknown> | undefined
  return client && typeof client.query === 'function' && typeof client.rollback === 'function'
    ? (client as unknown as PGliteTransaction)
    : undefined
}

/** The driver's connection of a drizzle transaction (postgres.js and node-postgres keep it there). */
function connectionOf(tx: DrizzlePgDatabase): unknown {
  return (tx as { session?: { client?: unknown } }).session?.client
}

/**
 * The statements of one transaction (or savepoint): sent straight to its connection when the
 * driver allows (see {@link TransactionStatements}), else built on the transaction through
 * drizzle.
 */
function createStoreTransaction<TTransaction>(
  tx: DrizzlePgDatabase,
  statements: TransactionStatements,
  life: TransactionLife,
): StoreTransaction<TTransaction> {
  const { table } = statements
  const pglite = statements.ensureFunctions && pgliteTransactionOf(tx)
  const driver = pglite ? undefined : directStatementsFor(connectionOf(tx), drizzleLoggerOf(tx))
  // After the store's own statements have their connection: the engine checks for itself.
  if (!pglite) guardPostgresJsTransaction(tx, life)
  // Statements go past drizzle: to the driver, or to PGlite's functions.
  const direct = pglite !== undefined || driver !== undefined
  const send = (statement: Statement, values: object): PromiseLike<unknown[][]> =>
    pglite && statement.pglite
      ? statement.pglite.runIn(pglite, values as Record<string, unknown>).catch((error) => {
          // Dropped by DISCARD TEMP: this transaction is lost (it cannot create them), the
          // next one creates them before it begins.
          if (isUndefinedFunction(error)) statements.forgetFunctions?.()
          throw error
        })
      : driver!(statement.name, statement).run(values as Record<string, unknown>)
  const claimRowFrom = async (statement: Statement, input: ClaimInput) =>
    claimRowOf((await send(statement, input))[0])

  /** Sets `lock_timeout` for the rest of the transaction. */
  async function setLockTimeout(value: string): Promise<void> {
    if (driver) await send(statements.setLockTimeout, { lockWait: value })
    else await tx.execute(sql`select set_config('lock_timeout', ${value}, true)`)
  }

  async function firstClaim(input: ClaimInput, lockWait: string) {
    const values = { ...input, lockWait }
    if (!direct) return (await boundedInsertOrRead(tx, table, values))[0]
    const [row] = await send(statements.boundedClaim, values)
    if (row === undefined) return undefined
    // `found` and `previous` follow the claim row's columns.
    const at = claimRowColumns.length
    return { ...claimRowOf(row)!, found: Number(row[at]), previous: row[at + 1] as string }
  }

  async function claim(input: ClaimInput, lockWait: string): Promise<TransactionClaimResult> {
    let previous: string | undefined
    const { result, attempt, underLock } = await claimInPhases(
      input,
      async (attempt) => {
        if (attempt > 1) {
          if (!direct) return (await insertOrReadQuery(tx, table, input))[0]
          return claimRowFrom(statements.insertOrRead, input)
        }
        const first = await firstClaim(input, lockWait)
        if (first === undefined) {
          throw new Error('idempotent-mutations: the claim statement returned no row')
        }
        previous = first.previous
        return first.found > 0 ? first : undefined
      },
      // A record to overwrite (it expired) or take over (a non-transactional executor's lease
      // ran out), still within the bound.
      async () => {
        if (!direct) return (await lockedClaimQuery(tx, table, input))[0]
        return claimRowFrom(statements.underLock, input)
      },
    )
    // The handler's statements run under the caller's lock_timeout, not the claim's: the first
    // statement put it back if it claimed; any other claiming statement did not. A refused
    // claim's transaction is rolled back by the engine, lock_timeout with it.
    if (result.claimed && (attempt > 1 || underLock)) await setLockTimeout(previous!)
    return result
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
      const rows = direct
        ? await send(statements.complete, input)
        : await completionQuery(tx, table, input)
      return rows.length > 0
    },

    savepoint<T>(fn: (transaction: StoreTransaction<TTransaction>) => Promise<T>): Promise<T> {
      // A drizzle transaction's nested transaction is a savepoint.
      return tx.transaction((nested) =>
        fn(createStoreTransaction<TTransaction>(nested, statements, life)),
      )
    },
  }
  return session
}
