import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { databaseUrl, testSchema } from '../support/env'
import { insertOrder, usePostgres } from './fixtures'
import { serveTrpc, settleCall } from './servers'

const skipped = databaseUrl ? '' : ' (skipped: DATABASE_URL is not set)'

describe.skipIf(!databaseUrl)(
  `tRPC transactional middleware over HTTP on PostgreSQL [postgres]${skipped}`,
  () => {
    // orders.ref is unique, checked at COMMIT: one test makes a commit fail with it.
    const pg = usePostgres(databaseUrl, testSchema('im_tx_trpc'), { max: 20, uniqueRef: true })
    const start = () => serveTrpc(pg.engine({ concurrency: 'wait', waitTimeout: '20s' }), pg.orders)
    let server: Awaited<ReturnType<typeof start>>
    beforeAll(async () => {
      server = await start()
    })
    afterAll(() => server.close())
    const keyed = (key: string) => ({ context: { key } })

    it('a committed mutation is replayed with Idempotent-Replay: the resolver ran once, one row exists', async () => {
      const ref = pg.newKey('commit')
      const first = await server.client.create.mutate({ ref, item: 'book' }, keyed(ref))
      const retry = await server.client.create.mutate({ ref, item: 'book' }, keyed(ref))

      expect(retry).toEqual(first)
      expect(server.responses.slice(-2).map((seen) => seen.replay)).toEqual([null, 'true'])
      expect(server.spies.create).toHaveBeenCalledTimes(1)
      expect(await pg.ordersOf(ref)).toEqual([{ id: first.id, ref, item: 'book' }])
    })

    it('200 concurrent duplicates over HTTP insert one row and all get the same response', async () => {
      const ref = pg.newKey('crowd')
      const before = server.spies.create.mock.calls.length
      const results = await Promise.all(
        Array.from({ length: 200 }, () =>
          server.client.create.mutate({ ref, item: 'lamp' }, keyed(ref)),
        ),
      )
      expect(server.spies.create.mock.calls.length - before).toBe(1)
      const [row] = await pg.ordersOf(ref)
      expect(new Set(results.map((result) => JSON.stringify(result)))).toEqual(
        new Set([JSON.stringify({ id: row?.id, item: 'lamp' })]),
      )
      expect(await pg.orderCount(ref)).toBe(1)
    })

    it('a deterministic error leaves no row and is replayed with the same code and message', async () => {
      const ref = pg.newKey('refuse')
      const first = await settleCall(server.client.refuse.mutate({ ref, item: 'sofa' }, keyed(ref)))
      const retry = await settleCall(server.client.refuse.mutate({ ref, item: 'sofa' }, keyed(ref)))

      expect(first).toEqual({
        ok: false,
        message: 'sofa is out of stock',
        code: 'BAD_REQUEST',
        status: 400,
      })
      expect(retry).toEqual(first)
      expect(server.responses.at(-1)?.replay).toBe('true')
      expect(server.spies.refuse).toHaveBeenCalledTimes(1)
      expect(await pg.orderCount(ref)).toBe(0)
    })

    it('an unexpected error leaves neither row nor record, and the retry runs and writes once', async () => {
      const ref = pg.newKey('crash')
      const first = await settleCall(server.client.crash.mutate({ ref, item: 'desk' }, keyed(ref)))
      expect(first).toMatchObject({ ok: false, code: 'INTERNAL_SERVER_ERROR' })
      expect(await pg.orderCount(ref)).toBe(0)
      expect(await pg.recordOf('crash', ref)).toBeUndefined()

      const retry = await settleCall(server.client.crash.mutate({ ref, item: 'desk' }, keyed(ref)))
      expect(retry).toMatchObject({ ok: true, value: { item: 'desk' } })
      expect(server.spies.crash).toHaveBeenCalledTimes(2)
      expect(await pg.orderCount(ref)).toBe(1)
    })

    it('a commit that fails answers 503 STORE_UNAVAILABLE with nothing recorded, and the retry runs again', async () => {
      const ref = pg.newKey('conflict')
      await insertOrder(pg.db, pg.orders, ref, 'already there')
      const calls = server.spies.create.mock.calls.length
      const failed = await settleCall(server.client.create.mutate({ ref, item: 'cup' }, keyed(ref)))

      expect(failed).toMatchObject({ ok: false, code: 'SERVICE_UNAVAILABLE', status: 503 })
      expect(await pg.orderCount(ref, 'cup')).toBe(0)
      expect(await pg.recordOf('create', ref)).toBeUndefined()
      const again = await settleCall(server.client.create.mutate({ ref, item: 'cup' }, keyed(ref)))
      expect(again).toMatchObject({ ok: false, code: 'SERVICE_UNAVAILABLE' })
      // Not replayed: the resolver ran both times, and the row it wrote never committed.
      expect(server.spies.create.mock.calls.length - calls).toBe(2)
    })

    it('ctx.idempotency.deriveKey gives a key per (procedure, key, name) that retries share', async () => {
      const ref = pg.newKey('derive')
      const first = await server.client.paymentKey.mutate({ ref }, keyed(`${ref}-a`))
      const other = await server.client.paymentKey.mutate({ ref }, keyed(`${ref}-b`))
      expect(first.payment).toMatch(/^[\w-]{43}$/)
      expect(other.payment).not.toBe(first.payment)
      expect(await server.client.paymentKey.mutate({ ref }, keyed(`${ref}-a`))).toEqual(first)
    })

    it('a mutation without a key still writes through ctx.tx, and a query gets no transaction', async () => {
      const ref = pg.newKey('unkeyed')
      const created = await server.client.create.mutate({ ref, item: 'pen' })
      expect(await pg.ordersOf(ref)).toEqual([{ id: created.id, ref, item: 'pen' }])
      expect(await pg.recordOf('create', ref)).toBeUndefined()
      expect(await server.client.inTransaction.query()).toBe(false)
    })
  },
)
