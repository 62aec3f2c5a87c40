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
      if (property === 'catch') {
        return (onRejected: (e: unknown) => unknown) => raced().catch(onRejected)
      }
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
export function guardPostgresJsTransaction(tx: object, life: TransactionLife): void {
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
