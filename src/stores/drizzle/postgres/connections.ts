import { afterDueCallbacks } from '../../../transaction'
import { sessionClientOf } from '../runner'

/**
 * What transactional mode does about the driver's connection while a transaction waits for the
 * handler: a connection lost meanwhile must fail the transaction's next statement, never crash
 * the process or run a statement outside the transaction.
 */

/** Whether the driver has settled a transaction (committed, rolled back, or given up). */
export interface TransactionLife {
  ended: boolean
  /** Resolves when it ends. */
  over: Promise<void>
  end(): void
}

export function transactionLife(): TransactionLife {
  let resolve!: () => void
  const over = new Promise<void>((done) => {
    resolve = done
  })
  const life: TransactionLife = {
    ended: false,
    over,
    end: () => {
      life.ended = true
      resolve()
    },
  }
  return life
}

/** A node-postgres pool behind a drizzle database, if that is what it runs on. */
export interface NodePostgresPool {
  connect(): Promise<{ release(error?: Error | boolean): void }>
}

export function nodePostgresPoolOf(db: object): NodePostgresPool | undefined {
  const client = sessionClientOf(db) as Record<string, unknown> | null | undefined
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
export async function onPoolClient<TTransaction, T>(
  db: object,
  pool: NodePostgresPool,
  fn: (tx: TTransaction) => Promise<T>,
): Promise<T> {
  const client = await pool.connect()
  const detach = listenForConnectionErrors(client)
  try {
    const session = (db as { session: object }).session
    const onClient = Object.assign(
      Object.create(Object.getPrototypeOf(session) as object),
      session,
      { client },
    ) as { transaction(run: (tx: TTransaction) => Promise<T>): Promise<T> }
    return await onClient.transaction(fn)
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
export function listenForConnectionErrors(client: unknown): (() => void) | undefined {
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

/*
 * Why every statement of a postgres.js transaction goes through the guard below. postgres.js
 * sends a transaction's statements to its connection even after that connection closed: with
 * the socket gone, the write it schedules throws `Cannot read properties of null (reading
 * 'write')` from a timer (an uncaught exception: the end of a Node process), and on a
 * connection already reconnecting for another query the statement would run on the new
 * session, outside any transaction. postgres.js tells nobody but `sql.begin()` that the
 * connection closed; the store learns it when that promise settles (`life.end`), a few promise
 * callbacks after the close, within the same macrotask. So a statement is sent only:
 *
 * - while `life` has not ended, checked when it is sent: a statement sent in a later macrotask
 *   than a close finds `life` ended; one sent in the same macrotask as the answer to the one
 *   before goes to a connection that was live then (a close is a macrotask of its own);
 * - never in reaction to a failure before the close has been seen: a statement's rejection
 *   (the close rejects those in flight) reaches its caller only after the callbacks already
 *   due (a macrotask), by when a close has ended `life`.
 *
 * postgres.js's own statements follow the same rule: a savepoint's `ROLLBACK TO` is sent only
 * if its callback's outcome is handed back to it ({@link savepointWhileOpen}), the
 * transaction's COMMIT or ROLLBACK only when the engine wakes its parked callback, which it
 * does after the same check (src/transaction.ts).
 */

/** The guarded `sql`s, each with what it knows of its statements. */
const guarded = new WeakMap<object, Scope>()

/**
 * A postgres.js query of a transaction that is sent only while the transaction is open, whose
 * rejection is delivered after the callbacks already due (see above), and that also settles
 * when the transaction ends: postgres.js never settles a statement it queued on a transaction's
 * connection (while an earlier one was still being described) if that connection closes, so
 * without this a handler awaiting it would wait for ever. It then rejects with
 * {@link TransactionClosedError}.
 */
function endingWith<Q extends object>(query: Q, life: TransactionLife, failed: () => void): Q {
  let settled: Promise<unknown> | undefined
  const raced = () => {
    settled ??= life.ended
      ? Promise.reject(new TransactionClosedError())
      : untilEnded(query as unknown as PromiseLike<unknown>, life).catch(async (error: unknown) => {
          failed()
          await afterDueCallbacks()
          throw error
        })
    return settled
  }
  const proxy: Q = new Proxy(query, {
    get: (target, property) => {
      if (property === 'then') {
        return (onFulfilled?: (v: unknown) => unknown, onRejected?: (e: unknown) => unknown) =>
          raced().then(onFulfilled, onRejected)
      }
      if (property === 'catch') {
        return (onRejected: (e: unknown) => unknown) => raced().catch(onRejected)
      }
      if (property === 'finally') return (onFinally: () => void) => raced().finally(onFinally)
      // `execute()` sends the query now: it is sent through `raced` instead.
      if (property === 'execute') {
        return () => {
          void raced().catch(() => {})
          return proxy
        }
      }
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
 * `query`'s outcome, or {@link TransactionClosedError} if `life` ends first. The error is built
 * only then: every statement of every transaction would otherwise pay for a stack at its end.
 */
function untilEnded(query: PromiseLike<unknown>, life: TransactionLife): Promise<unknown> {
  return new Promise((resolve, reject) => {
    let pending = true
    query.then(
      (value) => {
        pending = false
        resolve(value)
      },
      (error: unknown) => {
        pending = false
        reject(error)
      },
    )
    void life.over.then(() => {
      if (pending) reject(new TransactionClosedError())
    })
  })
}

/** What the guard uses of a postgres.js transaction's `sql`. */
type TransactionSql = ((...args: unknown[]) => unknown) & Record<string | symbol, unknown>

function isTransactionSql(client: unknown): client is TransactionSql {
  const candidate = client as Record<string, unknown> | undefined
  return (
    typeof client === 'function' &&
    typeof candidate?.unsafe === 'function' &&
    typeof candidate.savepoint === 'function'
  )
}

/**
 * What a guarded `sql` knows of its statements: whether one of them failed, which postgres.js's
 * scope also notes (and then sends `ROLLBACK TO`, or `ROLLBACK`, when its callback returns).
 */
interface Scope {
  failed: boolean
}

/**
 * postgres.js: a transaction's `sql` (or a savepoint's) that sends nothing once the transaction
 * has ended, delays its statements' failures past the callbacks already due, settles those
 * still pending when it ends, and runs savepoints through {@link savepointWhileOpen}.
 */
function guardedSql(client: TransactionSql, life: TransactionLife): TransactionSql {
  if (guarded.has(client)) return client
  const scope: Scope = { failed: false }
  const failed = () => {
    scope.failed = true
  }
  const sent = (query: unknown) =>
    typeof query === 'object' && query !== null ? endingWith(query, life, failed) : query
  const proxy: TransactionSql = new Proxy(client, {
    apply: (target, thisArg, args) =>
      life.ended ? refusedQuery() : sent(Reflect.apply(target, thisArg, args)),
    get: (target, property, receiver) => {
      const value = Reflect.get(target, property, receiver)
      if (property === 'unsafe' || property === 'file') {
        return (...args: unknown[]) =>
          life.ended ? refusedQuery() : sent((value as (...a: unknown[]) => unknown)(...args))
      }
      if (property === 'savepoint') {
        return (...args: unknown[]) => savepointWhileOpen(value as PostgresJsSavepoint, args, life)
      }
      return value
    },
  })
  guarded.set(proxy, scope)
  return proxy
}

type PostgresJsSavepoint = (...args: unknown[]) => Promise<unknown>

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown }

/** A promise that never settles: what postgres.js's scope of an ended transaction waits on. */
const never = new Promise<never>(() => {})

/**
 * `sql.savepoint(name?, fn)` of postgres.js, made safe for a connection that closes. Its scope
 * sends statements of its own when `fn` settles: `ROLLBACK TO` when `fn` rejects or when a
 * statement of the savepoint failed (even one `fn` caught), straight to the connection, past any
 * guard. So `fn` gets the savepoint's `sql` guarded, and its outcome goes back to postgres.js
 * only while the transaction is open: at once when postgres.js will send nothing (`fn` resolved
 * and none of its statements failed), else after the callbacks already due, when a close has
 * ended `life`. Once the transaction has ended, this settles the savepoint itself (`fn`'s error,
 * or {@link TransactionClosedError}: its writes are gone with the transaction) and postgres.js's
 * scope is left waiting for ever, sending nothing more to that connection. A savepoint still
 * running when its transaction ends rejects with {@link TransactionClosedError}.
 */
function savepointWhileOpen(
  savepoint: PostgresJsSavepoint,
  args: unknown[],
  life: TransactionLife,
): Promise<unknown> {
  if (life.ended) return Promise.reject(new TransactionClosedError())
  const first = args[0] as { raw?: unknown } | undefined
  // The tagged-template form (`sql.savepoint\`...\``): one statement in a savepoint.
  if (Array.isArray(first?.raw)) {
    return savepointWhileOpen(savepoint, [(sql: TransactionSql) => sql(...args)], life)
  }
  const fn = args[args.length - 1] as (sql: TransactionSql) => unknown
  if (typeof fn !== 'function') return savepoint(...args)
  return new Promise((resolve, reject) => {
    const inScope = (sql: TransactionSql): Promise<unknown> => {
      const inner = guardedSql(sql, life)
      const handBack = async (outcome: Outcome, statementFailed: boolean) => {
        const sends = !outcome.ok || statementFailed
        if (sends) await afterDueCallbacks()
        if (!life.ended) {
          if (outcome.ok) return outcome.value
          throw outcome.error
        }
        reject(outcome.ok ? new TransactionClosedError() : outcome.error)
        return never
      }
      return new Promise<unknown>((run) => run(fn(inner))).then(
        (value) => handBack({ ok: true, value }, guarded.get(inner)?.failed ?? true),
        (error: unknown) => handBack({ ok: false, error }, true),
      )
    }
    // A `ROLLBACK TO` that postgres.js queued behind a statement still being described is never
    // settled if the connection closes: the savepoint ends with its transaction instead.
    untilEnded(savepoint(...args.slice(0, -1), inScope), life).then(resolve, reject)
  })
}

/**
 * postgres.js: the transaction's `sql` (drizzle's `tx.session.client`) guarded (see above), so
 * that the handler's statements through `tx`, the store's own and the savepoints of either never
 * reach a connection that closed.
 */
export function guardPostgresJsTransaction(tx: object, life: TransactionLife): void {
  const session = (tx as { session?: { client?: unknown } }).session
  const client = session?.client
  if (session && isTransactionSql(client)) session.client = guardedSql(client, life)
}
