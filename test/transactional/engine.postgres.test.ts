import { connect } from 'node:net'
import { eq, sql } from 'drizzle-orm'
import { drizzle } from 'drizzle-orm/postgres-js'
import postgres from 'postgres'
import { describe, expect, it, vi } from 'vitest'
import { createIdempotency, IdempotencyError, type IdempotencyEvent } from '../../src'
import { createDrizzleStore } from '../../src/stores/drizzle'
import { TableCache } from '../stores/drizzle-fixtures'
import { databaseUrl, testSchema } from '../support/env'
import {
  claimAsDeadExecutor,
  deferred,
  defineTables,
  insertOrder,
  OutOfStock,
  usePostgres,
  waitForLockWaiter,
} from './fixtures'

const skipped = databaseUrl ? '' : ' (skipped: DATABASE_URL is not set)'
const operation = 'orders.create'

describe.skipIf(!databaseUrl)(`transactional engine on PostgreSQL [postgres]${skipped}`, () => {
  // 20 connections: every waiting duplicate holds one while its claim waits on the first.
  const pg = usePostgres(databaseUrl, testSchema('im_tx_engine'), { max: 20 })
  // A second schema whose orders.ref is unique, checked at COMMIT: a commit that fails.
  const strict = usePostgres(databaseUrl, testSchema('im_tx_engine_commit'), {
    max: 2,
    uniqueRef: true,
  })

  it('a committed handler is replayed from the record: the handler runs once, one row exists', async () => {
    const idempotency = pg.engine()
    const key = pg.newKey('commit')
    const handler = vi.fn(async ({ tx }: { tx: unknown }) =>
      insertOrder(tx, pg.orders, key, 'book'),
    )
    const request = { key, operation, payload: { item: 'book' }, transactional: true } as const

    const first = await idempotency.execute(request, handler)
    const retry = await idempotency.execute(request, handler)

    expect(first).toEqual({ value: { id: expect.any(Number), item: 'book' }, replayed: false })
    expect(retry).toEqual({ value: first.value, replayed: true })
    expect(handler).toHaveBeenCalledTimes(1)
    expect(await pg.orderCount(key)).toBe(1)
    expect(await pg.recordOf(operation, key)).toMatchObject({ status: 'completed' })
  })

  it('200 concurrent duplicates with concurrency wait insert one row and all get the same response', async () => {
    const idempotency = pg.engine({ concurrency: 'wait', waitTimeout: '20s' })
    const key = pg.newKey('crowd')
    const handler = vi.fn(async ({ tx }: { tx: unknown }) =>
      insertOrder(tx, pg.orders, key, 'lamp'),
    )
    const request = { key, operation, payload: { item: 'lamp' }, transactional: true } as const

    const results = await Promise.all(
      Array.from({ length: 200 }, () => idempotency.execute(request, handler)),
    )

    expect(handler).toHaveBeenCalledTimes(1)
    expect(await pg.orderCount(key)).toBe(1)
    const [row] = await pg.ordersOf(key)
    for (const result of results) expect(result.value).toEqual({ id: row?.id, item: 'lamp' })
    expect(results.filter((result) => !result.replayed)).toHaveLength(1)
  })

  it('a deterministic error rolls the handler writes back, records the error and replays it', async () => {
    const idempotency = pg.engine()
    const key = pg.newKey('refused')
    const handler = vi.fn(async ({ tx }: { tx: unknown }) => {
      await insertOrder(tx, pg.orders, key, 'sofa')
      throw new OutOfStock('sofa is out of stock')
    })
    const request = { key, operation, payload: { item: 'sofa' }, transactional: true } as const

    await expect(idempotency.execute(request, handler)).rejects.toBeInstanceOf(OutOfStock)
    const replay = idempotency.execute(request, handler)

    await expect(replay).rejects.toMatchObject({
      name: 'OutOfStock',
      message: 'sofa is out of stock',
      status: 422,
      code: 'OUT_OF_STOCK',
    })
    expect(handler).toHaveBeenCalledTimes(1)
    expect(await pg.orderCount(key)).toBe(0)
    expect(await pg.recordOf(operation, key)).toMatchObject({ status: 'completed' })
  })

  it('an unexpected error rolls back both the row and the claim, so a retry runs cleanly', async () => {
    const idempotency = pg.engine()
    const key = pg.newKey('crash')
    let calls = 0
    const handler = vi.fn(async ({ tx }: { tx: unknown }) => {
      const order = await insertOrder(tx, pg.orders, key, 'desk')
      if (++calls === 1) throw new Error('the payment service timed out')
      return order
    })
    const request = { key, operation, payload: { item: 'desk' }, transactional: true } as const

    await expect(idempotency.execute(request, handler)).rejects.toThrow('timed out')
    expect(await pg.orderCount(key)).toBe(0)
    expect(await pg.recordOf(operation, key)).toBeUndefined()

    const retry = await idempotency.execute(request, handler)
    expect(retry.replayed).toBe(false)
    expect(handler).toHaveBeenCalledTimes(2)
    expect(await pg.orderCount(key)).toBe(1)
  })

  it('while the first transaction is open its claim is invisible, and a rejecting duplicate gets 409 after rejectAfter', async () => {
    const events: IdempotencyEvent[] = []
    const idempotency = pg.engine({ concurrency: 'reject', rejectAfter: '50ms' }, events)
    const key = pg.newKey('inflight')
    const inside = deferred()
    const finish = deferred()
    const request = { key, operation, payload: { item: 'vase' }, transactional: true } as const
    const first = idempotency.execute(request, async ({ tx }) => {
      const order = await insertOrder(tx, pg.orders, key, 'vase')
      inside.resolve()
      await finish.promise
      return order
    })
    await inside.promise

    // No visible in_progress record, no visible row: other connections see nothing yet.
    expect(await pg.recordOf(operation, key)).toBeUndefined()
    expect(await pg.orderCount(key)).toBe(0)
    const duplicate = idempotency.execute(request, async () => 'must not run')
    await expect(duplicate).rejects.toMatchObject({
      code: 'IN_PROGRESS',
      status: 409,
      retryAfter: 1,
    })
    expect(events.map((event) => event.type)).toContain('conflict')

    finish.resolve()
    const done = await first
    const replay = await idempotency.execute(request, async () => 'must not run')
    expect(replay).toEqual({ value: done.value, replayed: true })
    expect(await pg.orderCount(key)).toBe(1)
  })

  it('a waiting duplicate whose wait runs out gets 409, and the first still commits once', async () => {
    const idempotency = pg.engine({ concurrency: 'wait', waitTimeout: '100ms' })
    const key = pg.newKey('long')
    const inside = deferred()
    const finish = deferred()
    const request = { key, operation, payload: { item: 'rug' }, transactional: true } as const
    const first = idempotency.execute(request, async ({ tx }) => {
      inside.resolve()
      await finish.promise
      return insertOrder(tx, pg.orders, key, 'rug')
    })
    await inside.promise

    await expect(idempotency.execute(request, async () => 'must not run')).rejects.toMatchObject({
      code: 'IN_PROGRESS',
    })
    finish.resolve()
    await first
    expect(await pg.orderCount(key)).toBe(1)
  })

  it('a waiting duplicate runs the operation itself when the first one rolls back', async () => {
    const idempotency = pg.engine({ concurrency: 'wait', waitTimeout: '20s' })
    const key = pg.newKey('handover')
    const inside = deferred()
    const fail = deferred()
    const request = { key, operation, payload: { item: 'bed' }, transactional: true } as const
    const first = idempotency.execute(request, async ({ tx }) => {
      await insertOrder(tx, pg.orders, key, 'bed')
      inside.resolve()
      await fail.promise
      throw new Error('connection reset')
    })
    await inside.promise
    const second = idempotency.execute(request, async ({ tx }) =>
      insertOrder(tx, pg.orders, key, 'bed'),
    )
    // The second claim is now blocked on the first transaction's uncommitted row: Postgres
    // reports it as a lock wait, the readiness signal this test waits for.
    await waitForLockWaiter(pg.db, `"${pg.schema}"."keys"`)
    fail.resolve()

    await expect(first).rejects.toThrow('connection reset')
    expect(await second).toMatchObject({ replayed: false })
    expect(await pg.orderCount(key)).toBe(1)
  })

  it('the handler runs under the caller lock_timeout, not the bound of the claim wait', async () => {
    const idempotency = pg.engine({ concurrency: 'reject', rejectAfter: '50ms' })
    const key = pg.newKey('settings')
    const lockTimeout = sql`select current_setting('lock_timeout') as lock_timeout`
    const [outside] = await pg.db.execute<{ lock_timeout: string }>(lockTimeout)
    const { value } = await idempotency.execute(
      { key, operation, payload: {}, transactional: true },
      async ({ tx }) => {
        const [inside] = await tx.execute<{ lock_timeout: string }>(lockTimeout)
        return inside?.lock_timeout
      },
    )
    expect(value).toBe(outside?.lock_timeout)
    expect(value).not.toBe('50ms')
  })

  it('statements (postgres.js): a first execution sends BEGIN, the claim with SAVEPOINT behind it in one round trip, the handler, the completion, COMMIT; an uncached replay BEGIN, the claim (and SAVEPOINT), ROLLBACK', async () => {
    // The claim sets the bound of its own wait and restores the caller's lock_timeout itself.
    const sent: string[] = []
    // Every write to the server's socket: postgres.js writes what it sends in one tick at once,
    // and waits for answers between writes unless statements are pipelined.
    let writes = 0
    const countingSocket = () => {
      const { hostname, port } = new URL(databaseUrl!)
      const socket = connect(Number(port || 5432), hostname)
      const write = socket.write.bind(socket) as (...args: unknown[]) => boolean
      socket.write = ((...args: unknown[]) => {
        writes++
        return write(...args)
      }) as typeof socket.write
      return socket
    }
    const client = postgres(databaseUrl!, {
      max: 1,
      onnotice: () => {},
      debug: (_connection, query) => sent.push(query.trim().split(/\s+/)[0]!.toLowerCase()),
      ...({ socket: countingSocket } as object),
    })
    try {
      await client`select 1` // the connection's own setup statements
      const store = createDrizzleStore(drizzle({ client }), { table: defineTables(pg.schema).keys })
      const idempotency = createIdempotency({ store, replayCache: false })
      const key = pg.newKey('round-trips')
      const request = { key, operation, payload: {}, transactional: true } as const
      // The first use of a statement on a connection prepares it, a round trip of its own.
      await idempotency.execute({ ...request, key: `${key}-warm-up` }, async ({ tx }) =>
        insertOrder(tx, pg.orders, `${key}-warm-up`, 'drum'),
      )
      sent.length = 0
      writes = 0
      const first = await idempotency.execute(request, async ({ tx }) =>
        insertOrder(tx, pg.orders, key, 'harp'),
      )
      expect(sent.splice(0)).toEqual(['begin', 'with', 'savepoint', 'insert', 'update', 'commit'])
      // BEGIN; the claim and SAVEPOINT; the insert (drizzle sends it unprepared, and postgres.js
      // asks for the types of an unprepared statement's parameters first: two); the completion;
      // COMMIT.
      expect(writes).toBe(6)
      writes = 0
      expect(await idempotency.execute(request, async () => 'must not run')).toEqual({
        value: first.value,
        replayed: true,
      })
      // The savepoint went out with the claim, before its answer: rolled back with the rest.
      expect(sent.splice(0)).toEqual(['begin', 'with', 'savepoint', 'rollback'])
      expect(writes).toBe(3)

      // A lapsed lease of a non-transactional executor: the claim reads it, takes it over under
      // the row lock (one statement more), and puts lock_timeout back (one more).
      const stale = pg.newKey('round-trips-takeover')
      await claimAsDeadExecutor(store, operation, stale)
      sent.length = 0
      const takenOver = await idempotency.execute(
        { ...request, key: stale },
        async ({ takeover }) => takeover,
      )
      expect(takenOver).toEqual({ value: true, replayed: false })
      // The handler's savepoint is nested in the one sent behind the first statement, so that
      // a recorded error drops the handler's writes and keeps the takeover.
      expect(sent.splice(0)).toEqual([
        'begin',
        'with',
        'savepoint',
        'with',
        'select',
        'savepoint',
        'update',
        'commit',
      ])

      // The claim and the completion went to the transaction's connection as prepared
      // statements (the direct path); drizzle's own path would have sent them unnamed.
      const prepared = (await client`select statement from pg_prepared_statements`).map(
        (row) => row.statement as string,
      )
      expect(
        prepared.filter((text) => /set_config\('lock_timeout'.*insert into/s.test(text)),
      ).toHaveLength(1)
      expect(prepared.some((text) => /^update .*'completed'/s.test(text))).toBe(true)
    } finally {
      await client.end()
    }
  })

  it('a commit that fails reports STORE_UNAVAILABLE, keeps no record, and a retry runs again', async () => {
    const idempotency = strict.engine()
    const key = strict.newKey('deferred')
    // Another committed row with this ref makes the deferred unique check fail at COMMIT.
    await insertOrder(strict.db, strict.orders, key, 'taken')
    let calls = 0
    const handler = vi.fn(async ({ tx }: { tx: unknown }) => {
      calls++
      return insertOrder(tx, strict.orders, calls === 1 ? key : `${key}-ok`, 'chair')
    })
    const request = { key, operation, payload: {}, transactional: true } as const

    const failed = idempotency.execute(request, handler)
    await expect(failed).rejects.toBeInstanceOf(IdempotencyError)
    await expect(failed).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE', status: 503 })
    expect(await strict.recordOf(operation, key)).toBeUndefined()
    expect(await strict.orderCount(key, 'chair')).toBe(0)

    expect(await idempotency.execute(request, handler)).toMatchObject({ replayed: false })
    expect(handler).toHaveBeenCalledTimes(2)
    expect(await strict.recordOf(operation, key)).toMatchObject({ status: 'completed' })
  })

  it('a completion the database refuses rolls everything back: STORE_UNAVAILABLE, no record, no row', async () => {
    const keys = sql`${sql.identifier(pg.schema)}."keys"`
    await pg.db.execute(sql`create or replace function ${sql.identifier(pg.schema)}.refuse_completion()
      returns trigger language plpgsql as $$
      begin
        if new.key like 'refuse-%' then raise exception 'completion refused'; end if;
        return new;
      end $$`)
    await pg.db.execute(sql`create trigger refuse_completion before update on ${keys}
      for each row execute function ${sql.identifier(pg.schema)}.refuse_completion()`)
    const idempotency = pg.engine()
    const key = `refuse-${pg.newKey('completion')}`
    const request = { key, operation, payload: {}, transactional: true } as const
    const handler = vi.fn(async ({ tx }: { tx: unknown }) =>
      insertOrder(tx, pg.orders, key, 'easel'),
    )
    try {
      const failed = idempotency.execute(request, handler)
      await expect(failed).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE', status: 503 })
      expect(await pg.recordOf(operation, key)).toBeUndefined()
      expect(await pg.orderCount(key)).toBe(0)
    } finally {
      await pg.db.execute(sql`drop trigger refuse_completion on ${keys}`)
    }
    expect(await idempotency.execute(request, handler)).toMatchObject({ replayed: false })
    expect(handler).toHaveBeenCalledTimes(2)
    expect(await pg.orderCount(key)).toBe(1)
  })
})

describe.skipIf(!databaseUrl)(
  `transactional engine behind a drizzle query cache, on PostgreSQL [postgres]${skipped}`,
  () => {
    // A cache that answers repeated selects until a write to a table they read; a select of no
    // table is answered from it forever. The store goes through drizzle's query path here (see
    // usePostgres), so every statement of transactional mode passes the cache, and each must
    // still run each time: the claim with its lock_timeout swap, the restore, the completion.
    const cache = new TableCache()
    const pg = usePostgres(databaseUrl, testSchema('im_tx_engine_cached'), { max: 20, cache })

    it('the cache answers repeated selects of the same database', async () => {
      const ref = pg.newKey('stale')
      const read = () => pg.storeDb.select().from(pg.orders).where(eq(pg.orders.ref, ref))
      expect(await read()).toEqual([])
      // Written around the cache (another database object): the cached answer goes stale.
      await insertOrder(pg.db, pg.orders, ref, 'stool')
      expect(await read()).toEqual([])
      expect(await pg.orderCount(ref)).toBe(1)
      expect(cache.hits).toBeGreaterThan(0)
    })

    // Later rounds repeat the first one's statements: one answered from the cache would leave a
    // duplicate without its bound (waiting past the test's timeout) or a stale record.
    it.each([1, 2, 3])(
      'round %i: a duplicate gets 409 after rejectAfter, the retry replays, the handler sees the caller lock_timeout',
      async () => {
        const idempotency = pg.engine({ concurrency: 'reject', rejectAfter: '50ms' })
        const key = pg.newKey('cached')
        const inside = deferred()
        const finish = deferred()
        const readLockTimeout = sql`select current_setting('lock_timeout') as lock_timeout`
        const [outside] = await pg.db.execute<{ lock_timeout: string }>(readLockTimeout)
        const request = { key, operation, payload: { item: 'lamp' }, transactional: true } as const
        const handler = vi.fn(async ({ tx }: { tx: unknown }) => {
          const [setting] = await (tx as typeof pg.db).execute<{ lock_timeout: string }>(
            readLockTimeout,
          )
          const order = await insertOrder(tx, pg.orders, key, 'lamp')
          inside.resolve()
          await finish.promise
          return { ...order, lockTimeout: setting?.lock_timeout }
        })
        const first = idempotency.execute(request, handler)
        await inside.promise

        await expect(idempotency.execute(request, handler)).rejects.toMatchObject({
          code: 'IN_PROGRESS',
        })
        finish.resolve()
        const done = await first
        expect(done.value.lockTimeout).toBe(outside?.lock_timeout)
        expect(await idempotency.execute(request, handler)).toEqual({
          value: done.value,
          replayed: true,
        })
        expect(handler).toHaveBeenCalledTimes(1)
        expect(await pg.orderCount(key)).toBe(1)
      },
    )
  },
)
