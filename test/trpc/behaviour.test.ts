import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { type App, createApp, serve, settle } from './fixtures'

// The contract's rows (a keyed call runs once and replays, 422, 409, failures, scopes) run over
// these same servers in test/adapters/behaviour.test.ts; here, what only tRPC has.

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

    it('runs a query on every call even when its input carries a key', async () => {
      const spy = vi.spyOn(app.store, 'claim')
      await server.client.order.list.query({ name: 'pen', idempotencyKey: 'k-q' })
      await server.client.order.list.query({ name: 'pen', idempotencyKey: 'k-q' })
      expect(app.spies.list).toHaveBeenCalledTimes(2)
      expect(spy).not.toHaveBeenCalled()
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
