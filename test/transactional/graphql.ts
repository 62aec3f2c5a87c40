import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { databaseUrl, testSchema } from '../support/env'
import { insertOrder, usePostgres } from './fixtures'
import type { serveYoga } from './servers'

const skipped = databaseUrl ? '' : ' (skipped: DATABASE_URL is not set)'

const create =
  'mutation ($ref: String!, $item: String!) { createOrder(ref: $ref, item: $item) { id item } }'
const refuse =
  'mutation ($ref: String!, $item: String!) { refuseOrder(ref: $ref, item: $item) { id } }'
const crash =
  'mutation ($ref: String!, $item: String!) { crashOrder(ref: $ref, item: $item) { id } }'

/**
 * The transactional GraphQL plugin through a real HTTP server on PostgreSQL: the same cases for
 * GraphQL Yoga and Apollo Server (`serve` starts one over ./servers.ts' resolvers; `schema` is
 * the file's Postgres schema).
 */
export function describeGraphQLTransactional(
  name: string,
  serve: typeof serveYoga,
  schema: string,
): void {
  describe.skipIf(!databaseUrl)(
    `${name} transactional plugin over HTTP on PostgreSQL [postgres]${skipped}`,
    () => {
      // orders.ref is unique, checked at COMMIT: one test makes a commit fail with it.
      const pg = usePostgres(databaseUrl, testSchema(schema), { max: 20, uniqueRef: true })
      const start = () => serve(pg.engine({ concurrency: 'wait', waitTimeout: '20s' }), pg.orders)
      let server: Awaited<ReturnType<typeof start>>
      beforeAll(async () => {
        server = await start()
      })
      afterAll(() => server.close())
      const keyed = (key: string) => ({ 'idempotency-key': key })

      it('a committed mutation is replayed verbatim with Idempotent-Replay: the resolver ran once, one row exists', async () => {
        const ref = pg.newKey('commit')
        const first = await server.post(create, { ref, item: 'book' }, keyed(ref))
        const retry = await server.post(create, { ref, item: 'book' }, keyed(ref))

        expect(first).toMatchObject({ status: 200, replay: null })
        expect(retry).toEqual({ ...first, replay: 'true' })
        const [row] = await pg.ordersOf(ref)
        expect(first.body).toEqual({ data: { createOrder: { id: row?.id, item: 'book' } } })
        expect(await pg.orderCount(ref)).toBe(1)
        expect(await pg.recordOf('createOrder', ref)).toMatchObject({ status: 'completed' })
      })

      it('200 concurrent duplicates over HTTP insert one row and all get the same body', async () => {
        const ref = pg.newKey('crowd')
        const before = server.resolvers.createOrder.mock.calls.length
        const replies = await Promise.all(
          Array.from({ length: 200 }, () => server.post(create, { ref, item: 'lamp' }, keyed(ref))),
        )
        expect(server.resolvers.createOrder.mock.calls.length - before).toBe(1)
        const [row] = await pg.ordersOf(ref)
        const bodies = new Set(replies.map((reply) => JSON.stringify(reply.body)))
        expect(bodies).toEqual(
          new Set([JSON.stringify({ data: { createOrder: { id: row?.id, item: 'lamp' } } })]),
        )
        expect(await pg.orderCount(ref)).toBe(1)
      })

      it('an expected error leaves no row and is replayed with the same body', async () => {
        const ref = pg.newKey('refuse')
        const first = await server.post(refuse, { ref, item: 'sofa' }, keyed(ref))
        const retry = await server.post(refuse, { ref, item: 'sofa' }, keyed(ref))

        expect(first.body).toMatchObject({
          data: { refuseOrder: null },
          errors: [{ message: 'sofa is out of stock', extensions: { code: 'OUT_OF_STOCK' } }],
        })
        expect(retry).toEqual({ ...first, replay: 'true' })
        expect(server.resolvers.refuseOrder).toHaveBeenCalledTimes(1)
        expect(await pg.orderCount(ref)).toBe(0)
      })

      it('a masked unexpected error rolls back row and record; the client gets no data, and a retry runs again', async () => {
        const ref = pg.newKey('crash')
        const calls = server.resolvers.crashOrder.mock.calls.length
        const first = await server.post(crash, { ref, item: 'desk' }, keyed(ref))
        expect(first.body).toEqual({
          data: null,
          errors: [expect.objectContaining({ message: 'Unexpected error.' })],
        })
        expect(JSON.stringify(first.body)).not.toContain('hunter2')
        expect(await pg.orderCount(ref)).toBe(0)
        expect(await pg.recordOf('crashOrder', ref)).toBeUndefined()

        const retry = await server.post(crash, { ref, item: 'desk' }, keyed(ref))
        expect(retry.replay).toBeNull()
        expect(server.resolvers.crashOrder.mock.calls.length - calls).toBe(2)
        expect(await pg.orderCount(ref)).toBe(0)
      })

      it('each root field runs in its own savepoint: an expected error drops only its own writes, and the result replays', async () => {
        const ref = pg.newKey('fields')
        const both = `mutation ($ref: String!) {
          kept: createOrder(ref: $ref, item: "kept") { item }
          dropped: refuseOrder(ref: $ref, item: "dropped") { id }
        }`
        const first = await server.post(both, { ref }, keyed(ref))
        const retry = await server.post(both, { ref }, keyed(ref))

        expect(first.body).toMatchObject({
          data: { kept: { item: 'kept' }, dropped: null },
          errors: [{ message: 'dropped is out of stock', path: ['dropped'] }],
        })
        expect(retry).toEqual({ ...first, replay: 'true' })
        expect(await pg.orderCount(ref, 'kept')).toBe(1)
        expect(await pg.orderCount(ref, 'dropped')).toBe(0)
      })

      it('an unexpected error in a later root field rolls back the earlier fields too', async () => {
        const ref = pg.newKey('partial')
        const both = `mutation ($ref: String!) {
          first: createOrder(ref: $ref, item: "first") { item }
          second: crashOrder(ref: $ref, item: "second") { id }
        }`
        const reply = await server.post(both, { ref }, keyed(ref))
        expect(reply.body.data).toBeNull()
        expect(reply.body.errors).toEqual([
          expect.objectContaining({ message: 'Unexpected error.' }),
        ])
        expect(await pg.orderCount(ref)).toBe(0)
        expect(await pg.recordOf('createOrder,crashOrder', ref)).toBeUndefined()
      })

      it('a commit that fails answers 503 IDEMPOTENCY_STORE_UNAVAILABLE and records nothing', async () => {
        const ref = pg.newKey('conflict')
        await insertOrder(pg.db, pg.orders, ref, 'already there')
        const reply = await server.post(create, { ref, item: 'cup' }, keyed(ref))

        expect(reply.status).toBe(503)
        expect(reply.body).toEqual({
          errors: [
            expect.objectContaining({ extensions: { code: 'IDEMPOTENCY_STORE_UNAVAILABLE' } }),
          ],
        })
        expect(await pg.orderCount(ref, 'cup')).toBe(0)
        expect(await pg.recordOf('createOrder', ref)).toBeUndefined()
      })

      it('context.idempotency.deriveKey is stable per key, and other keys derive other values', async () => {
        const ref = pg.newKey('derive')
        const payment = 'mutation { payment { key } }'
        const first = await server.post(payment, {}, keyed(`${ref}-a`))
        const other = await server.post(payment, {}, keyed(`${ref}-b`))
        expect(first.body.data.payment.key).toMatch(/^[\w-]{43}$/)
        expect(other.body.data.payment.key).not.toBe(first.body.data.payment.key)
      })

      it('a mutation without a key still writes through context.tx, and a query gets no transaction', async () => {
        const ref = pg.newKey('unkeyed')
        const created = await server.post(create, { ref, item: 'pen' })
        expect(created.body.data.createOrder.item).toBe('pen')
        expect(await pg.orderCount(ref)).toBe(1)
        const query = await server.post('query ($ref: String!) { orderCount(ref: $ref) }', { ref })
        expect(query.body).toEqual({ data: { orderCount: ref.length } })
      })
    },
  )
}
