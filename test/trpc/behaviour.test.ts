import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { type App, createApp, serve, settle } from './fixtures'

const servers = [
  { transport: 'fetch', superjson: false },
  { transport: 'fetch', superjson: true },
  { transport: 'standalone', superjson: false },
  { transport: 'standalone', superjson: true },
  { transport: 'express', superjson: false },
  { transport: 'fastify', superjson: false },
  { transport: 'fastify', superjson: true },
  { transport: 'next', superjson: false },
] as const

describe.each(servers)(
  'tRPC client and $transport server (superjson: $superjson)',
  ({ transport, superjson }) => {
    let app: App
    let server: Awaited<ReturnType<typeof serve>>
    beforeEach(async () => {
      app = createApp({ superjson })
      server = await serve(app, transport)
    })
    afterEach(() => server.close())

    it('runs a keyed mutation once and replays it to a retry with Idempotent-Replay: true', async () => {
      const { order } = server.client
      const first = await order.create.mutate({ name: 'pen' }, { context: { key: 'k-1' } })
      const retry = await order.create.mutate({ name: 'pen' }, { context: { key: 'k-1' } })
      expect(retry).toEqual(first)
      expect(app.spies.create).toHaveBeenCalledTimes(1)
      expect(server.responses.map((r) => [r.status, r.replay])).toEqual([
        [200, null],
        [200, 'true'],
      ])
    })

    it('runs a mutation without a key on every call and records nothing', async () => {
      await server.client.order.create.mutate({ name: 'pen' })
      await server.client.order.create.mutate({ name: 'pen' })
      expect(app.spies.create).toHaveBeenCalledTimes(2)
      expect(server.responses.every((r) => r.replay === null)).toBe(true)
    })

    it('runs a query on every call even when it carries a key', async () => {
      const spy = vi.spyOn(app.store, 'claim')
      await server.client.order.list.query({ name: 'pen', idempotencyKey: 'k-q' })
      await server.client.order.list.query(undefined, { context: { key: 'k-q' } })
      expect(app.spies.list).toHaveBeenCalledTimes(2)
      expect(spy).not.toHaveBeenCalled()
    })

    it('answers a retry whose input changed with HTTP 422 KEY_REUSED and does not run it', async () => {
      await server.client.order.create.mutate({ name: 'pen' }, { context: { key: 'k-2' } })
      const reused = await settle(
        server.client.order.create.mutate({ name: 'ink' }, { context: { key: 'k-2' } }),
      )
      expect(reused).toMatchObject({
        ok: false,
        data: { code: 'UNPROCESSABLE_CONTENT', httpStatus: 422, idempotency: 'KEY_REUSED' },
      })
      expect(server.responses.at(-1)?.status).toBe(422)
      expect(app.spies.create).toHaveBeenCalledTimes(1)
    })

    it('answers a concurrent duplicate with 409 IN_PROGRESS and Retry-After while the first runs', async () => {
      const first = settle(server.client.order.slow.mutate(undefined, { context: { key: 'k-3' } }))
      await app.slowStarted.promise
      const duplicate = await settle(
        server.client.order.slow.mutate(undefined, { context: { key: 'k-3' } }),
      )
      app.slowRelease.resolve()
      expect(duplicate).toMatchObject({
        ok: false,
        data: { code: 'CONFLICT', httpStatus: 409, idempotency: 'IN_PROGRESS' },
      })
      expect(server.responses.find((r) => r.status === 409)?.retryAfter).toBe('1')
      expect(await first).toEqual({ ok: true, value: 'done' })
      expect(app.spies.slow).toHaveBeenCalledTimes(1)
    })

    it('rejects a mutation whose meta requires a key with 400 KEY_REQUIRED when none is sent', async () => {
      const missing = await settle(server.client.order.strict.mutate())
      expect(missing).toMatchObject({
        ok: false,
        data: { code: 'BAD_REQUEST', httpStatus: 400, idempotency: 'KEY_REQUIRED' },
      })
      expect(server.responses.at(-1)?.status).toBe(400)
      expect(app.spies.create).not.toHaveBeenCalled()
    })

    it('replays a recorded BAD_REQUEST with the same code, message and data, without running', async () => {
      const call = () =>
        settle(server.client.order.reject.mutate({ name: 'pen' }, { context: { key: 'k-4' } }))
      const first = await call()
      const retry = await call()
      expect(first).toMatchObject({ ok: false, message: 'no orders for pen' })
      expect(first.ok || first.data).toMatchObject({ code: 'BAD_REQUEST', httpStatus: 400 })
      expect(retry).toEqual(first)
      expect(app.spies.reject).toHaveBeenCalledTimes(1)
      expect(server.responses.map((r) => r.replay)).toEqual([null, 'true'])
    })

    it('replays an input validation error with the same zod details in its data', async () => {
      const call = () =>
        settle(server.client.order.create.mutate({ name: 'ab' }, { context: { key: 'k-5' } }))
      const first = await call()
      const retry = await call()
      expect(first).toMatchObject({
        ok: false,
        data: { code: 'BAD_REQUEST', zod: { fieldErrors: { name: [expect.any(String)] } } },
      })
      expect(retry).toEqual(first)
      expect(server.responses.at(-1)?.replay).toBe('true')
    })

    it('runs again after an INTERNAL_SERVER_ERROR, because that outcome is not recorded', async () => {
      const call = () =>
        settle(server.client.order.crash.mutate(undefined, { context: { key: 'k-6' } }))
      expect(await call()).toMatchObject({ ok: false, data: { code: 'INTERNAL_SERVER_ERROR' } })
      expect(await call()).toMatchObject({ ok: false, data: { code: 'INTERNAL_SERVER_ERROR' } })
      expect(app.spies.crash).toHaveBeenCalledTimes(2)
      expect(server.responses.map((r) => [r.status, r.replay])).toEqual([
        [500, null],
        [500, null],
      ])
    })

    it('runs once per scope: two callers with one key both run, and each is replayed its own', async () => {
      const { order } = server.client
      const alice = await order.create.mutate(
        { name: 'pen' },
        { context: { key: 'k-7', user: 'a' } },
      )
      const bob = await order.create.mutate({ name: 'pen' }, { context: { key: 'k-7', user: 'b' } })
      const aliceAgain = await order.create.mutate(
        { name: 'pen' },
        { context: { key: 'k-7', user: 'a' } },
      )
      expect(app.spies.create).toHaveBeenCalledTimes(2)
      expect(aliceAgain).toEqual(alice)
      expect(bob).toEqual(alice)
      expect(server.responses.map((r) => r.replay)).toEqual([null, null, 'true'])
    })

    it('treats one key on two procedures as two operations', async () => {
      await server.client.order.create.mutate({ name: 'pen' }, { context: { key: 'k-8' } })
      await server.client.order.archive.mutate({ name: 'pen' }, { context: { key: 'k-8' } })
      expect(app.spies.create).toHaveBeenCalledTimes(2)
    })
  },
)

describe.each(['fetch', 'standalone'] as const)('superjson over the %s server', (transport) => {
  it('replays Dates, Maps, BigInts and undefined exactly as the first caller got them', async () => {
    const app = createApp({ superjson: true })
    const server = await serve(app, transport)
    try {
      const call = () => server.client.order.rich.mutate(undefined, { context: { key: 'r-1' } })
      const first = await call()
      const retry = await call()
      expect(app.spies.rich).toHaveBeenCalledTimes(1)
      expect(server.responses.at(-1)?.replay).toBe('true')
      expect(retry).toEqual(first)
      expect(retry.at).toEqual(new Date('2024-02-29T12:00:00.000Z'))
      expect(retry.tags).toEqual(new Map([['vip', 1n]]))
      expect(retry.big).toBe(2n ** 70n)
      expect(Object.hasOwn(retry, 'nothing')).toBe(true)
    } finally {
      await server.close()
    }
  })
})
