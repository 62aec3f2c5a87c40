import { sql } from 'drizzle-orm'
import { drizzle as drizzleNodePostgres } from 'drizzle-orm/node-postgres'
import { drizzle as drizzlePostgresJs } from 'drizzle-orm/postgres-js'
import pg from 'pg'
import postgres from 'postgres'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import {
  createIdempotency,
  type IdempotencyEvent,
  OutcomeUnknownError,
  StoreUnavailableError,
} from '../../src'
import type { DrizzlePgDatabase } from '../../src/stores/drizzle'
import { databaseUrl, testSchema } from '../support/env'
import { startCommitProxy } from './fixtures/commit-proxy'
import {
  connect,
  createStore,
  dropSchema,
  executionsOf,
  recordsOf,
  resetSchema,
} from './fixtures/database'
import { startProxy, type TcpProxy } from './fixtures/proxy'

const schema = testSchema('im_rel_resets')

function deferred() {
  let resolve!: () => void
  const promise = new Promise<void>((r) => {
    resolve = r
  })
  return { promise, resolve }
}

/**
 * Connection resets in the middle of transactions. Each case records every uncaught exception
 * and unhandled rejection of this process while it runs, and asserts there were none: before
 * these fixes, postgres.js threw `Cannot read properties of null (reading 'write')` from a timer
 * when the library ended a transaction whose connection was gone, and a node-postgres pool
 * client held for the handler emitted an `error` nobody listened to.
 */
describe.skipIf(!databaseUrl)(
  `connection resets mid-transaction crash nothing [postgres]${databaseUrl ? '' : ' (skipped: DATABASE_URL is not set)'}`,
  () => {
    const admin = connect({ url: databaseUrl, max: 2 })
    const crashes: unknown[] = []
    const record = (error: unknown) => void crashes.push(error)
    let tables = 0
    beforeAll(async () => {
      await resetSchema(admin, schema)
      process.on('uncaughtException', record)
      process.on('unhandledRejection', record)
    })
    afterAll(async () => {
      process.off('uncaughtException', record)
      process.off('unhandledRejection', record)
      await dropSchema(admin, schema)
      await admin.close()
    })
    afterEach(async () => {
      // Whatever a dead connection would still throw comes from a timer: let those run first.
      for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve))
      const seen = crashes.splice(0)
      expect(seen).toEqual([])
    })

    /** Ends, from the server side, every backend of the application named `name`. */
    const terminate = (name: string) =>
      admin.query(
        `select pg_terminate_backend(pid) from pg_stat_activity where application_name = '${name}'`,
      )

    /** The database's address, or the proxy's in front of it. */
    const urlThrough = (proxy: TcpProxy | undefined) => {
      if (!proxy) return databaseUrl!
      const url = new URL(databaseUrl!)
      url.hostname = proxy.host
      url.port = String(proxy.port)
      return url.toString()
    }
    let through: TcpProxy | undefined

    const drivers = {
      /** postgres.js: `closed` resolves when a connection of the client has closed. */
      'postgres.js': (name: string) => {
        let closed = deferred()
        const client = postgres(urlThrough(through), {
          max: 2,
          onnotice: () => {},
          connection: { application_name: name },
          onclose: () => closed.resolve(),
        })
        return {
          db: drizzlePostgresJs({ client }) as unknown as DrizzlePgDatabase,
          nextClose: () => {
            closed = deferred()
            return closed.promise
          },
          end: () => client.end({ timeout: 1 }),
        }
      },
      'node-postgres': (name: string) => {
        let closed = deferred()
        const pool = new pg.Pool({
          connectionString: urlThrough(through),
          max: 2,
          application_name: name,
        })
        pool.on('error', () => {})
        pool.on('connect', (client) => client.on('end', () => closed.resolve()))
        return {
          db: drizzleNodePostgres({ client: pool }) as unknown as DrizzlePgDatabase,
          nextClose: () => {
            closed = deferred()
            return closed.promise
          },
          end: () => pool.end(),
        }
      },
    }

    async function setup(driverName: keyof typeof drivers) {
      const name = `im-resets-${++tables}`
      const driver = drivers[driverName](name)
      const table = `keys_${tables}`
      const store = await createStore(driver.db, schema, table)
      const events: IdempotencyEvent[] = []
      const idempotency = createIdempotency({
        store,
        transactional: true,
        logger: { warn() {}, error() {} },
        onEvent: (event) => void events.push(event),
      })
      /** A handler that writes its execution row, waits at the gate, then returns or throws. */
      let inside = deferred()
      const run = (
        key: string,
        gate: Promise<void>,
        outcome: 'return' | 'throw' | 'statement' = 'return',
      ) =>
        idempotency.execute(
          { key, operation: 'orders.create', transactional: true },
          async ({ tx }) => {
            await (tx as DrizzlePgDatabase).execute(
              `insert into "${schema}".executions (scope, key, pid, size) values ('', '${key}', ${process.pid}, 0)` as never,
            )
            inside.resolve()
            await gate
            if (outcome === 'throw') throw new Error('the handler failed')
            if (outcome === 'statement') {
              await (tx as DrizzlePgDatabase).execute(`select 1 as after_gate` as never)
            }
            return { key }
          },
        )
      /** Resolves when the next handler has written its row and waits at its gate. */
      const nextInside = () => {
        inside = deferred()
        return inside.promise
      }
      return { ...driver, name, table, idempotency, events, run, nextInside }
    }

    /** The same application, its connections through a TCP proxy (black holes, resets). */
    async function setupThroughProxy(driverName: keyof typeof drivers) {
      const target = new URL(databaseUrl!)
      const proxy = await startProxy({
        host: target.hostname,
        port: Number(target.port || 5432),
      })
      through = proxy
      try {
        const app = await setup(driverName)
        return {
          ...app,
          proxy,
          end: async () => {
            proxy.blackHole(false)
            await app.end()
            await proxy.close()
          },
        }
      } finally {
        through = undefined
      }
    }

    const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

    for (const driverName of Object.keys(drivers) as (keyof typeof drivers)[]) {
      it(`${driverName}: a connection lost while BEGIN waits in a black hole answers 503 STORE_UNAVAILABLE and the next key runs`, async () => {
        const app = await setupThroughProxy(driverName)
        try {
          const open = deferred()
          open.resolve()
          // Both connections of the pool open and idle, so BEGIN goes to one of them.
          await Promise.all([
            app.run(`warm-a-${driverName}`, open.promise),
            app.run(`warm-b-${driverName}`, open.promise),
          ])
          app.proxy.blackHole(true)
          const first = app.run(`hole-begin-${driverName}`, open.promise).catch((e) => e)
          await wait(150)
          const closed = app.nextClose()
          app.proxy.blackHole(false)
          await closed
          expect(await first).toBeInstanceOf(StoreUnavailableError)
          expect(await executionsOf(admin, schema, `hole-begin-${driverName}`)).toEqual([])
          expect(await app.run(`after-hole-${driverName}`, open.promise)).toMatchObject({
            replayed: false,
          })
        } finally {
          await app.end()
        }
      })

      it(`${driverName}: a handler's statement through tx after its connection was lost fails in the handler and crashes nothing`, async () => {
        const app = await setupThroughProxy(driverName)
        try {
          const gate = deferred()
          const atGate = app.nextInside()
          const key = `dead-tx-${driverName}`
          const first = app.run(key, gate.promise, 'statement').catch((e) => e)
          await atGate
          const closed = app.nextClose()
          app.proxy.reset()
          await closed
          // The handler carries on with its transaction, which is gone: its next statement fails.
          gate.resolve()
          expect(await first).toBeInstanceOf(Error)
          expect(await executionsOf(admin, schema, key)).toEqual([])
          const open = deferred()
          open.resolve()
          expect(await app.run(`after-dead-tx-${driverName}`, open.promise)).toMatchObject({
            replayed: false,
          })
        } finally {
          await app.end()
        }
      })

      it(`${driverName}: a reset while the handler runs answers 503 STORE_UNAVAILABLE (nothing committed) and the same client serves the next key`, async () => {
        const app = await setup(driverName)
        try {
          const gate = deferred()
          const closed = app.nextClose()
          const atGate = app.nextInside()
          const first = app.run(`reset-return-${driverName}`, gate.promise).catch((e) => e)
          await atGate
          await terminate(app.name)
          await closed
          gate.resolve()
          expect(await first).toBeInstanceOf(StoreUnavailableError)
          expect(await executionsOf(admin, schema, `reset-return-${driverName}`)).toEqual([])
          const open = deferred()
          open.resolve()
          expect(await app.run(`after-reset-${driverName}`, open.promise)).toMatchObject({
            replayed: false,
          })
          expect(await executionsOf(admin, schema, `after-reset-${driverName}`)).toHaveLength(1)
        } finally {
          await app.end()
        }
      })

      it(`${driverName}: a reset while the handler runs, then a handler error, gives the caller its error and releases nothing twice`, async () => {
        const app = await setup(driverName)
        try {
          const gate = deferred()
          const closed = app.nextClose()
          const atGate = app.nextInside()
          const first = app.run(`reset-throw-${driverName}`, gate.promise, 'throw').catch((e) => e)
          await atGate
          await terminate(app.name)
          await closed
          gate.resolve()
          expect(await first).toMatchObject({ message: 'the handler failed' })
          expect(await executionsOf(admin, schema, `reset-throw-${driverName}`)).toEqual([])
          expect(await recordsOf(admin, schema, app.table, `reset-throw-${driverName}`)).toEqual([])
        } finally {
          await app.end()
        }
      })
    }

    it('postgres.js: statements a handler queued behind another on a transaction whose connection is lost reject with TRANSACTION_CLOSED instead of waiting for ever', async () => {
      const app = await setupThroughProxy('postgres.js')
      try {
        const key = 'queued-on-dead-tx'
        const queued = deferred()
        let outcomes: PromiseSettledResult<unknown>[] = []
        const first = app.idempotency
          .execute({ key, operation: 'orders.create', transactional: true }, async ({ tx }) => {
            const db = tx as DrizzlePgDatabase
            app.proxy.blackHole(true)
            // The first statement has a parameter and is not prepared yet: postgres.js describes
            // it first and queues the second in the transaction until the first is answered.
            const statements = [
              db.execute(sql`select ${1}::int as described_first`),
              db.execute(sql`select ${2}::int as queued_behind`),
            ]
            queued.resolve()
            outcomes = await Promise.allSettled(statements)
            throw new Error('the handler saw its statements fail')
          })
          .catch((e) => e)
        await queued.promise
        const closed = app.nextClose()
        app.proxy.blackHole(false)
        await closed
        expect(await first).toMatchObject({ message: 'the handler saw its statements fail' })
        expect(outcomes.map((outcome) => outcome.status)).toEqual(['rejected', 'rejected'])
        // drizzle wraps what the driver rejected with.
        expect((outcomes[1] as PromiseRejectedResult).reason.cause).toMatchObject({
          code: 'TRANSACTION_CLOSED',
        })
        expect(await recordsOf(admin, schema, app.table, key)).toEqual([])
      } finally {
        await app.end()
      }
    })

    /**
     * postgres.js's savepoint scope sends `ROLLBACK TO` by itself, past the guard, when its
     * callback rejects or when one of its statements failed (even one the callback caught):
     * before the fix, a savepoint whose statement failed because its connection closed sent it
     * to the closed connection, and postgres.js threw from a timer.
     */
    const savepointCases = [
      {
        name: "a handler's own savepoint (tx.transaction) that rejects",
        recovers: false,
        open: (tx: unknown, fn: (inner: DrizzlePgDatabase) => Promise<unknown>) =>
          (tx as DrizzlePgDatabase).transaction(fn),
      },
      {
        name: "an adapter's savepoint (lease.savepoint) that catches its statement's failure",
        recovers: true,
        open: undefined,
      },
    ] as const
    for (const savepointCase of savepointCases) {
      it(`postgres.js: ${savepointCase.name}, its statement failed by a lost connection, crashes nothing`, async () => {
        const app = await setupThroughProxy('postgres.js')
        try {
          const key = `savepoint-on-dead-tx-${savepointCase.recovers ? 'caught' : 'thrown'}`
          const sent = deferred()
          /** The savepoint's body: one statement, held in a black hole until the connection goes. */
          const body = async (inner: DrizzlePgDatabase) => {
            app.proxy.blackHole(true)
            const statement = inner.execute(
              `insert into "${schema}".executions (scope, key, pid, size) values ('', '${key}', ${process.pid}, 0)` as never,
            )
            sent.resolve()
            if (!savepointCase.recovers) return statement
            return statement.catch((error: unknown) => ({ caught: error }))
          }
          let outcome: Promise<unknown>
          if (savepointCase.open) {
            const open = savepointCase.open
            outcome = app.idempotency
              .execute({ key, operation: 'orders.create', transactional: true }, ({ tx }) =>
                open(tx, body),
              )
              .catch((e) => e)
          } else {
            const attempt = await app.idempotency.begin({
              key,
              operation: 'orders.create',
              transactional: true,
            })
            if (attempt.kind !== 'execute') throw new Error(`no lease: ${attempt.kind}`)
            const { lease } = attempt
            outcome = lease.savepoint!((tx) => body(tx as DrizzlePgDatabase))
              .then(
                (value) => ({ value }),
                (error: unknown) => ({ error }),
              )
              .finally(() => lease.release())
          }
          await sent.promise
          const closed = app.nextClose()
          app.proxy.blackHole(false)
          await closed
          const seen = await outcome
          // The savepoint failed (its connection is gone), whatever its body did with the error.
          if (savepointCase.open) expect(seen).toBeInstanceOf(Error)
          else expect(seen).toMatchObject({ error: expect.any(Error) })
          expect(await executionsOf(admin, schema, key)).toEqual([])
          expect(await recordsOf(admin, schema, app.table, key)).toEqual([])
          const open = deferred()
          open.resolve()
          expect(await app.run(`after-${key}`, open.promise)).toMatchObject({ replayed: false })
        } finally {
          await app.end()
        }
      })
    }

    it('postgres.js: a COMMIT whose answer is lost answers 503 OUTCOME_UNKNOWN, not "not run"; the retry replays what committed', async () => {
      const target = new URL(databaseUrl!)
      const proxy = await startCommitProxy({
        host: target.hostname,
        port: Number(target.port || 5432),
      })
      const client = postgres(databaseUrl!, {
        max: 1,
        onnotice: () => {},
        host: proxy.host,
        port: proxy.port,
      })
      try {
        const db = drizzlePostgresJs({ client }) as unknown as DrizzlePgDatabase
        const store = await createStore(db, schema, `keys_${++tables}`)
        const events: IdempotencyEvent[] = []
        const idempotency = createIdempotency({
          store,
          transactional: true,
          logger: { warn() {}, error() {} },
          onEvent: (event) => void events.push(event),
        })
        // No 'commit' in the key: the proxy looks for that word in what the driver sends.
        const key = 'lost-reply'
        let runs = 0
        const handler = async ({ tx }: { tx?: unknown }) => {
          runs++
          await (tx as DrizzlePgDatabase).execute(
            `insert into "${schema}".executions (scope, key, pid, size) values ('', '${key}', ${process.pid}, 0)` as never,
          )
          return { key }
        }
        const lost = proxy.loseNextCommitReply()
        const error = await idempotency
          .execute({ key, operation: 'orders.create', transactional: true }, handler)
          .catch((e) => e)
        await lost
        expect(error).toBeInstanceOf(OutcomeUnknownError)
        expect(error).toMatchObject({ code: 'OUTCOME_UNKNOWN', status: 503 })
        expect(events.map((e) => e.type)).toContain('outcome-unknown')
        // It did commit, and the retry says so.
        expect(await executionsOf(admin, schema, key)).toHaveLength(1)
        const retry = await idempotency.execute(
          { key, operation: 'orders.create', transactional: true },
          handler,
        )
        expect(retry).toEqual({ value: { key }, replayed: true })
        expect(runs).toBe(1)
      } finally {
        await client.end({ timeout: 1 })
        await proxy.close()
      }
    })
  },
)
