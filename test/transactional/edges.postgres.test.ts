import { randomUUID } from 'node:crypto'
import { sql } from 'drizzle-orm'
import { describe, expect, it, vi } from 'vitest'
import { fingerprint, type IdempotencyEvent } from '../../src'
import { databaseUrl, testSchema } from '../support/env'
import {
  claimAsDeadExecutor,
  deferred,
  insertOrder,
  OutOfStock,
  untilServerTime,
  usePostgres,
  waitForLockWaiter,
} from './fixtures'

const skipped = databaseUrl ? '' : ' (skipped: DATABASE_URL is not set)'
const operation = 'orders.create'
const scope = JSON.stringify(['', operation])

describe.skipIf(!databaseUrl)(
  `transactional mode, edge cases on PostgreSQL [postgres]${skipped}`,
  () => {
    const pg = usePostgres(databaseUrl, testSchema('im_tx_edges'), { max: 20 })
    const serializable = usePostgres(databaseUrl, testSchema('im_tx_edges_serializable'), {
      max: 12,
      isolation: 'serializable',
    })

    it('deriveKey is the same after a rolled-back attempt, and differs per name and per key', async () => {
      const idempotency = pg.engine()
      const key = pg.newKey('derive')
      const request = { key, operation, payload: {}, transactional: true } as const
      const seen: string[] = []
      await expect(
        idempotency.execute(request, async ({ deriveKey }) => {
          seen.push(deriveKey('payment'))
          throw new Error('the provider timed out')
        }),
      ).rejects.toThrow('timed out')
      const { value } = await idempotency.execute(request, async ({ deriveKey }) => ({
        payment: deriveKey('payment'),
        email: deriveKey('email'),
      }))
      const other = await idempotency.execute(
        { ...request, key: `${key}-other` },
        async (context) => context.deriveKey('payment'),
      )

      expect(value.payment).toBe(seen[0])
      expect(value.email).not.toBe(value.payment)
      expect(other.value).not.toBe(value.payment)
    })

    it('a non-transactional claim whose lease ran out is taken over inside the transaction', async () => {
      const events: IdempotencyEvent[] = []
      const idempotency = pg.engine({}, events)
      const key = pg.newKey('takeover')
      const payload = { item: 'drum' }
      const dead = await claimAsDeadExecutor(pg.store, operation, key, payload, 50)
      await untilServerTime(pg.db, dead.record.lockedUntil)

      const lockTimeout = sql`select current_setting('lock_timeout') as lock_timeout`
      const [outside] = await pg.db.execute<{ lock_timeout: string }>(lockTimeout)
      const result = await idempotency.execute(
        { key, operation, payload, transactional: true },
        async ({ tx, takeover }) => {
          const [inside] = await (tx as unknown as typeof pg.db).execute<{ lock_timeout: string }>(
            lockTimeout,
          )
          return {
            takeover,
            // The takeover's statement ran under the claim's bound; the handler does not.
            lockTimeout: inside?.lock_timeout,
            ...(await insertOrder(tx, pg.orders, key, 'drum')),
          }
        },
      )
      expect(result).toMatchObject({
        replayed: false,
        value: { takeover: true, item: 'drum', lockTimeout: outside?.lock_timeout },
      })
      expect(events.map((event) => event.type)).toEqual(['takeover', 'executed'])
      const record = await pg.recordOf(operation, key)
      expect(record).toMatchObject({ status: 'completed' })
      expect(record?.leaseToken).not.toBe(dead.record.leaseToken)
    })

    it('a takeover whose handler throws a deterministic error: its writes are rolled back, the takeover stays and records the error', async () => {
      // The takeover takes statements after the claim's first, which the savepoint sent behind
      // that first statement (postgres.js) already holds: the handler's writes must go to a
      // savepoint of their own, or dropping them would drop the takeover too.
      const idempotency = pg.engine()
      const key = pg.newKey('takeover-refused')
      const payload = { item: 'lamp' }
      const dead = await claimAsDeadExecutor(pg.store, operation, key, payload, 50)
      await untilServerTime(pg.db, dead.record.lockedUntil)
      const handler = vi.fn(async ({ tx }: { tx: unknown }) => {
        await insertOrder(tx, pg.orders, key, 'lamp')
        throw new OutOfStock('lamp is out of stock')
      })
      const request = { key, operation, payload, transactional: true } as const

      await expect(idempotency.execute(request, handler)).rejects.toBeInstanceOf(OutOfStock)
      await expect(idempotency.execute(request, handler)).rejects.toMatchObject({
        name: 'OutOfStock',
        status: 422,
      })
      expect(handler).toHaveBeenCalledTimes(1)
      expect(await pg.orderCount(key)).toBe(0)
      const record = await pg.recordOf(operation, key)
      expect(record).toMatchObject({ status: 'completed' })
      expect(record?.leaseToken).not.toBe(dead.record.leaseToken)
    })

    it('a claim that waited on a commit reads again and takes the lapsed lease over; the handler runs under the caller lock_timeout', async () => {
      const events: IdempotencyEvent[] = []
      const idempotency = pg.engine({ concurrency: 'wait', waitTimeout: '20s' }, events)
      const key = pg.newKey('waited')
      const payload = { item: 'lute' }
      const lockTimeout = sql`select current_setting('lock_timeout') as lock_timeout`
      const [outside] = await pg.db.execute<{ lock_timeout: string }>(lockTimeout)
      const inserted = deferred()
      const commit = deferred()
      // Another transaction holds, uncommitted, an in-progress record whose lease has lapsed
      // (a non-transactional executor that died): the claim waits for it, and its statement's
      // snapshot, older than that commit, reads no row.
      const other = pg.db.transaction(async (tx) => {
        await tx.execute(
          sql`insert into ${sql.identifier(pg.schema)}."keys"
            (scope, key, fingerprint, status, response, lease_token, locked_until, expires_at)
            values (${scope}, ${key}, ${fingerprint(payload)}, 'in_progress', null, 'dead',
              now() - interval '1 second', now() + interval '1 minute')`,
        )
        inserted.resolve()
        await commit.promise
      })
      await inserted.promise
      const running = idempotency.execute(
        { key, operation, payload, transactional: true },
        async ({ tx, takeover }) => {
          const [inside] = await (tx as unknown as typeof pg.db).execute<{ lock_timeout: string }>(
            lockTimeout,
          )
          return { takeover, lockTimeout: inside?.lock_timeout }
        },
      )
      await waitForLockWaiter(pg.db, `"${pg.schema}"."keys"`)
      commit.resolve()
      await other

      expect(await running).toMatchObject({
        replayed: false,
        value: { takeover: true, lockTimeout: outside?.lock_timeout },
      })
      expect(events.map((event) => event.type)).toEqual(['takeover', 'executed'])
      expect(await pg.recordOf(operation, key)).toMatchObject({ status: 'completed' })
    })

    it('a claim that waited on a commit and finds the key free on its second read claims it there; the handler runs under the caller lock_timeout', async () => {
      // reject mode with a long bound: a second read that met the committed claim would be a 409.
      const idempotency = pg.engine({ rejectAfter: '20s' })
      const key = pg.newKey('freed')
      const lockTimeout = sql`select current_setting('lock_timeout') as lock_timeout`
      const [outside] = await pg.db.execute<{ lock_timeout: string }>(lockTimeout)
      const table = sql`${sql.identifier(pg.schema)}."keys"`
      const release = sql`${sql.identifier(pg.schema)}.release_between_reads`
      // The other claim is released after it commits and before the waiting claim reads again,
      // a window of one round trip: a statement trigger deletes it at the start of that read.
      // It also fires before the first read, which cannot see the uncommitted claim yet.
      await pg.db.execute(sql`create function ${release}() returns trigger language plpgsql as $$
        begin
          delete from ${table} where lease_token = 'released-between-reads';
          return null;
        end $$`)
      await pg.db.execute(sql`create trigger release_between_reads before insert on ${table}
        for each statement execute function ${release}()`)
      const inserted = deferred()
      const commit = deferred()
      try {
        // Another executor's claim, uncommitted, under a valid lease: the claim waits for it,
        // and its statement's snapshot, older than the commit, reads no row.
        const other = pg.db.transaction(async (tx) => {
          await tx.execute(
            sql`insert into ${table}
              (scope, key, fingerprint, status, response, lease_token, locked_until, expires_at)
              values (${scope}, ${key}, 'f', 'in_progress', null, 'released-between-reads',
                now() + interval '1 minute', now() + interval '1 minute')`,
          )
          inserted.resolve()
          await commit.promise
        })
        await inserted.promise
        const running = idempotency.execute(
          { key, operation, payload: {}, transactional: true },
          async ({ tx }) => {
            const [inside] = await (tx as unknown as typeof pg.db).execute<{
              lock_timeout: string
            }>(lockTimeout)
            return inside?.lock_timeout
          },
        )
        await waitForLockWaiter(pg.db, `"${pg.schema}"."keys"`)
        commit.resolve()
        await other
        // Claimed by the second read, which must put lock_timeout back by its own statement.
        expect(await running).toEqual({ value: outside?.lock_timeout, replayed: false })
        expect(await pg.recordOf(operation, key)).toMatchObject({ status: 'completed' })
      } finally {
        await pg.db.execute(sql`drop trigger release_between_reads on ${table}`)
        await pg.db.execute(sql`drop function ${release}()`)
      }
    })

    it('an expired completed record counts as absent: the operation runs again', async () => {
      const idempotency = pg.engine({ ttl: 50 })
      const key = pg.newKey('expired')
      const handler = vi.fn(async ({ tx }: { tx: unknown }) =>
        insertOrder(tx, pg.orders, key, 'oboe'),
      )
      const request = { key, operation, payload: {}, transactional: true } as const
      await idempotency.execute(request, handler)
      const expired = await pg.recordOf(operation, key)
      await untilServerTime(pg.db, expired?.expiresAt ?? 0)

      expect(await idempotency.execute(request, handler)).toMatchObject({ replayed: false })
      expect(handler).toHaveBeenCalledTimes(2)
      expect(await pg.orderCount(key)).toBe(2)
    })

    it('a refused transactional claim holds no lock on the record it read', async () => {
      const key = pg.newKey('nolock')
      await pg.engine().execute({ key, operation, payload: {}, transactional: true }, async () => 1)
      const locked = await pg.store.transaction(async (session) => {
        const refused = await session.claim(
          {
            scope,
            key,
            fingerprint: fingerprint({}),
            leaseToken: randomUUID(),
            lockTimeoutMs: 60_000,
            ttlMs: 60_000,
          },
          { lockWaitMs: 1000 },
        )
        expect(refused).toMatchObject({ claimed: false, record: { status: 'completed' } })
        // Another connection locks the row at once while this transaction is still open.
        return pg.db.execute(
          sql`select 1 from ${sql.identifier(pg.schema)}."keys" where scope = ${scope} and key = ${key} for update nowait`,
        )
      })
      expect(locked).toHaveLength(1)
    })

    it('200 concurrent replays of a completed record in reject mode all replay, none answers 409', async () => {
      // Even with a 1 ms bound on lock waits: replays do not queue on the record.
      const idempotency = pg.engine({ concurrency: 'reject', rejectAfter: 1 })
      const key = pg.newKey('replays')
      const request = { key, operation, payload: {}, transactional: true } as const
      const first = await idempotency.execute(request, async ({ tx }) =>
        insertOrder(tx, pg.orders, key, 'flute'),
      )
      const replays = await Promise.all(
        Array.from({ length: 200 }, () => idempotency.execute(request, async () => 'must not run')),
      )
      for (const replay of replays) expect(replay).toEqual({ value: first.value, replayed: true })
    })

    it('under SERIALIZABLE, duplicates whose claim fails to serialize retry in a new transaction and replay', async () => {
      const store = serializable.store
      const transactions = vi.spyOn(store, 'transaction')
      const idempotency = serializable.engine({ concurrency: 'wait', waitTimeout: '20s' })
      const key = serializable.newKey('serializable')
      const request = { key, operation, payload: {}, transactional: true } as const
      const inside = deferred()
      const finish = deferred()
      const first = idempotency.execute(request, async ({ tx }) => {
        const order = await insertOrder(tx, serializable.orders, key, 'tuba')
        inside.resolve()
        await finish.promise
        return order
      })
      await inside.promise
      const duplicates = Array.from({ length: 10 }, () =>
        idempotency.execute(request, async () => 'must not run'),
      )
      // Every duplicate has taken its snapshot and waits on the first transaction's row.
      await waitForLockWaiter(serializable.db, `"${serializable.schema}"."keys"`, 10)
      finish.resolve()

      const done = await first
      for (const duplicate of await Promise.all(duplicates)) {
        expect(duplicate).toEqual({ value: done.value, replayed: true })
      }
      // One transaction per caller, plus one per claim retried after a serialization failure.
      expect(transactions.mock.calls.length).toBeGreaterThan(11)
      expect(await serializable.orderCount(key)).toBe(1)
    })
  },
)
