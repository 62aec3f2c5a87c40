import { initTRPC } from '@trpc/server'
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { z } from 'zod'
import { createIdempotencyMiddleware } from '../../adapters/trpc'
import { createIdempotency } from '../../src'
import { createDrizzleStore } from '../../src/stores/drizzle'
import { serveApollo } from './apollo-server'
import {
  claimAsDeadExecutor,
  deferred,
  defineTables,
  insertOrder,
  OutOfStock,
  usePglite,
} from './fixtures'
import { serveYoga } from './servers'

const operation = 'orders.create'

// PGlite is one embedded connection that runs one transaction at a time: a duplicate does not
// wait on a row lock (there is no second transaction to hold one) but on the whole first
// transaction, then reads its record. No lock_timeout applies.
describe('transactional mode on PGlite', () => {
  const lite = usePglite('im_tx_pglite')

  it('a committed handler is replayed: it runs once and its row exists once', async () => {
    const idempotency = lite.engine()
    const key = lite.newKey('commit')
    const handler = vi.fn(async ({ tx }: { tx: unknown }) =>
      insertOrder(tx, lite.orders, key, 'book'),
    )
    const request = { key, operation, payload: {}, transactional: true } as const
    const first = await idempotency.execute(request, handler)
    expect(await idempotency.execute(request, handler)).toEqual({
      value: first.value,
      replayed: true,
    })
    expect(handler).toHaveBeenCalledTimes(1)
    expect(await lite.orderCount(key)).toBe(1)
  })

  it('a tRPC mutation that streams its output is refused: its writes roll back and the key is released', async () => {
    const t = initTRPC.create()
    const procedure = t.procedure.use(
      createIdempotencyMiddleware({ idempotency: lite.engine(), transactional: true }),
    )
    const key = lite.newKey('stream')
    const router = t.router({
      rows: procedure.input(z.object({ idempotencyKey: z.string() })).mutation(async ({ ctx }) => {
        await insertOrder(ctx.tx, lite.orders, key, 'book')
        return (async function* () {
          yield 'row'
        })()
      }),
    })
    const caller = t.createCallerFactory(router)({})
    await expect(caller.rows({ idempotencyKey: key })).rejects.toThrow(/cannot stream its output/)
    expect(await lite.orderCount(key)).toBe(0)
    expect(await lite.recordOf('rows', key)).toBeUndefined()
  })

  it('a copy in the replay cache ends ttl after a moment before the transaction began', async () => {
    let at = Date.UTC(2030, 0, 1)
    const ttl = 60_000
    // The engine's clock is ours to move; the record's own expiry (the database's clock, a minute
    // of real time away) is not reached here, so a retry that misses the copy replays the store.
    const idempotency = lite.engine({ ttl, now: () => at, replayCache: { maxAge: '1h' } })
    const transactions = vi.spyOn(idempotency.store, 'transaction')
    const key = lite.newKey('cache-ttl')
    const request = { key, operation, payload: {}, transactional: true } as const
    const began = at
    await idempotency.execute(request, async () => {
      at += 5_000 // the transaction takes a while
      return 'first'
    })
    expect(transactions).toHaveBeenCalledTimes(1)
    at = began + ttl - 1
    expect(await idempotency.execute(request, async () => 'second')).toEqual({
      value: 'first',
      replayed: true,
    })
    expect(transactions).toHaveBeenCalledTimes(1)
    // Counted from before the transaction, not from its commit five seconds later.
    at = began + ttl
    expect(await idempotency.execute(request, async () => 'third')).toEqual({
      value: 'first',
      replayed: true,
    })
    expect(transactions).toHaveBeenCalledTimes(2)
  })

  it('a deterministic error leaves no row and replays; an unexpected one leaves nothing and reruns', async () => {
    const idempotency = lite.engine()
    const refused = lite.newKey('refused')
    const crashed = lite.newKey('crashed')
    const refuse = vi.fn(async ({ tx }: { tx: unknown }) => {
      await insertOrder(tx, lite.orders, refused, 'sofa')
      throw new OutOfStock('sofa is out of stock')
    })
    const crash = vi.fn(async ({ tx }: { tx: unknown }) => {
      await insertOrder(tx, lite.orders, crashed, 'desk')
      throw new Error('the payment service timed out')
    })
    const request = (key: string) => ({ key, operation, payload: {}, transactional: true }) as const

    await expect(idempotency.execute(request(refused), refuse)).rejects.toThrow('out of stock')
    await expect(idempotency.execute(request(refused), refuse)).rejects.toMatchObject({
      code: 'OUT_OF_STOCK',
    })
    await expect(idempotency.execute(request(crashed), crash)).rejects.toThrow('timed out')
    await expect(idempotency.execute(request(crashed), crash)).rejects.toThrow('timed out')

    expect(refuse).toHaveBeenCalledTimes(1)
    expect(crash).toHaveBeenCalledTimes(2)
    expect(await lite.orderCount(refused)).toBe(0)
    expect(await lite.orderCount(crashed)).toBe(0)
    expect(await lite.recordOf(operation, crashed)).toBeUndefined()
  })

  it("through drizzle's query path (a driver without a direct one): commit, replay, a recorded error, a takeover", async () => {
    // Without `$client` the store cannot tell the driver: every statement of the transaction is
    // built by drizzle, as for drivers it has no direct path for.
    const generic = drizzlePglite({ client: lite.client })
    Reflect.deleteProperty(generic, '$client')
    const store = createDrizzleStore(generic, { table: defineTables('im_tx_pglite').keys })
    const idempotency = createIdempotency({ store, replayCache: false })
    const request = (key: string) => ({ key, operation, payload: {}, transactional: true }) as const

    const key = lite.newKey('generic')
    const first = await idempotency.execute(request(key), async ({ tx }) =>
      insertOrder(tx, lite.orders, key, 'lamp'),
    )
    expect(await idempotency.execute(request(key), async () => 'again')).toEqual({
      value: first.value,
      replayed: true,
    })
    expect(await lite.orderCount(key)).toBe(1)

    const refused = lite.newKey('generic-refused')
    const refuse = async ({ tx }: { tx: unknown }) => {
      await insertOrder(tx, lite.orders, refused, 'rug')
      throw new OutOfStock('rug is out of stock')
    }
    await expect(idempotency.execute(request(refused), refuse)).rejects.toThrow('out of stock')
    await expect(idempotency.execute(request(refused), refuse)).rejects.toMatchObject({
      code: 'OUT_OF_STOCK',
    })
    expect(await lite.orderCount(refused)).toBe(0)

    // A lapsed lease of a non-transactional executor, taken over in the transaction.
    const stale = lite.newKey('generic-stale')
    await claimAsDeadExecutor(store, operation, stale)
    expect(await idempotency.execute(request(stale), async ({ takeover }) => takeover)).toEqual({
      value: true,
      replayed: false,
    })
    expect(await lite.recordOf(operation, stale)).toMatchObject({ status: 'completed' })
  })

  it('after DISCARD TEMP dropped the session functions, a transaction that finds them gone fails with STORE_UNAVAILABLE; the next one, or a call outside transactional mode, creates them again', async () => {
    const idempotency = lite.engine({ replayCache: false })
    const warm = lite.newKey('discard-warm')
    await idempotency.execute(
      { key: warm, operation, payload: {}, transactional: true },
      async () => 1,
    )
    await lite.client.exec('DISCARD TEMP')
    const key = lite.newKey('discard')
    const request = { key, operation, payload: {}, transactional: true } as const
    const handler = vi.fn(async ({ tx }: { tx: unknown }) =>
      insertOrder(tx, lite.orders, key, 'vase'),
    )
    // Inside the transaction the functions cannot be created again: that one call fails as a
    // store outage would, with nothing run or recorded, and is safe to retry.
    await expect(idempotency.execute(request, handler)).rejects.toMatchObject({
      code: 'STORE_UNAVAILABLE',
    })
    expect(handler).not.toHaveBeenCalled()
    expect(await idempotency.execute(request, handler)).toMatchObject({ replayed: false })
    expect(handler).toHaveBeenCalledTimes(1)
    expect(await lite.orderCount(key)).toBe(1)

    // A call outside transactional mode that finds its function gone creates them all again,
    // so the next transaction finds its own.
    await lite.client.exec('DISCARD TEMP')
    const plain = lite.newKey('discard-plain')
    const outside = createIdempotency({ store: lite.store, replayCache: false })
    expect(await outside.execute({ key: plain, operation, payload: {} }, async () => 2)).toEqual({
      value: 2,
      replayed: false,
    })
    const after = lite.newKey('discard-after')
    expect(
      await idempotency.execute(
        { key: after, operation, payload: {}, transactional: true },
        async ({ tx }) => insertOrder(tx, lite.orders, after, 'jug'),
      ),
    ).toMatchObject({ replayed: false })
    expect(await lite.orderCount(after)).toBe(1)
  })

  it('concurrent duplicates in reject mode wait for the first transaction and replay it: no 409', async () => {
    const idempotency = lite.engine({ concurrency: 'reject' })
    const key = lite.newKey('queue')
    const inside = deferred()
    const finish = deferred()
    const request = { key, operation, payload: {}, transactional: true } as const
    const first = idempotency.execute(request, async ({ tx }) => {
      const order = await insertOrder(tx, lite.orders, key, 'lamp')
      inside.resolve()
      await finish.promise
      return order
    })
    await inside.promise
    const duplicates = Array.from({ length: 20 }, () =>
      idempotency.execute(request, async () => 'must not run'),
    )
    finish.resolve()

    const done = await first
    for (const duplicate of await Promise.all(duplicates)) {
      expect(duplicate).toEqual({ value: done.value, replayed: true })
    }
    expect(await lite.orderCount(key)).toBe(1)
  })

  describe.each([
    ['GraphQL Yoga', serveYoga],
    ['Apollo Server', serveApollo],
  ])('through %s', (_name, serve) => {
    let server: Awaited<ReturnType<typeof serve>>
    beforeAll(async () => {
      server = await serve(lite.engine(), lite.orders)
    })
    afterAll(() => server.close())

    it('root fields run in nested savepoints: a failing field drops only its own row', async () => {
      const ref = lite.newKey('fields')
      const both = `mutation ($ref: String!) {
        kept: createOrder(ref: $ref, item: "kept") { item }
        dropped: refuseOrder(ref: $ref, item: "dropped") { id }
      }`
      const first = await server.post(both, { ref }, { 'idempotency-key': ref })
      const retry = await server.post(both, { ref }, { 'idempotency-key': ref })

      expect(first.body.data).toEqual({ kept: { item: 'kept' }, dropped: null })
      expect(retry).toEqual({ ...first, replay: 'true' })
      expect(await lite.orderCount(ref, 'kept')).toBe(1)
      expect(await lite.orderCount(ref, 'dropped')).toBe(0)
    })
  })
})
