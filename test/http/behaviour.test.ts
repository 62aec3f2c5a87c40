import { afterEach, describe, expect, it, vi } from 'vitest'
import {
  createHttpApp as createAppOn,
  type HttpAppOptions,
  json,
  type Transport,
  transports,
} from './fixtures'
import { useHttpStores } from './store-kinds'

const stores = useHttpStores('http_behaviour')

// The contract's rows (a keyed POST runs once and replays, refusals as problem+json, 409, the
// failure policy, scopes and routes) run through these same transports and stores in
// test/adapters/behaviour.test.ts; here, what only plain HTTP routes have.

describe.each(stores)('on the $name store', ({ createStore, skip }) => {
  describe.skipIf(skip).each(transports)('plain HTTP routes through %s', (transport: Transport) => {
    const createHttpApp = async (on: Transport, options: HttpAppOptions = {}) =>
      createAppOn(on, { store: await createStore(), ...options })
    let app: Awaited<ReturnType<typeof createHttpApp>>
    afterEach(() => app?.close())
    const open = async (options?: HttpAppOptions) => {
      app = await createHttpApp(transport, options)
      return app
    }

    it('replays the response headers the route set, with Idempotent-Replay: true', async () => {
      const { send } = await open()
      const first = await send('/payments', { key: 'k-1', ...json({ amount: 42 }) })
      const retry = await send('/payments', { key: 'k-1', ...json({ amount: 42 }) })
      expect(retry.headers.get('x-charge-id')).toBe(first.headers.get('x-charge-id'))
      expect(retry.headers.get('content-type')).toBe(first.headers.get('content-type'))
      expect(first.headers.get('idempotent-replay')).toBeNull()
      expect(retry.headers.get('idempotent-replay')).toBe('true')
    })

    it('gives the first caller its Set-Cookie and keeps it out of the record and the replay', async () => {
      const { send, store } = await open()
      const first = await send('/payments', { key: 'k-cookie', ...json({ amount: 1 }) })
      const retry = await send('/payments', { key: 'k-cookie', ...json({ amount: 1 }) })
      expect(first.headers.get('set-cookie')).toBe('session=secret')
      expect(retry.headers.get('set-cookie')).toBeNull()
      const record = await store.get(JSON.stringify(['', 'POST /payments']), 'k-cookie')
      expect(record?.response).not.toContain('secret')
    })

    it('lets GET, HEAD, OPTIONS, PUT and DELETE through without touching the store, key or not', async () => {
      const { send, store, routes } = await open()
      const claim = vi.spyOn(store, 'claim')
      for (const method of ['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE']) {
        const response = await send('/payments', { method, key: 'k-safe' })
        expect(response.status).toBe(200)
      }
      expect(routes).toHaveBeenCalledTimes(5)
      expect(claim).not.toHaveBeenCalled()
    })

    it('replays a JSON body sent with other key order and whitespace, and answers another body 422', async () => {
      const { send, charges } = await open()
      await send('/payments', { key: 'k-2', ...json({ amount: 5, currency: 'eur' }) })
      const reordered = await send('/payments', {
        key: 'k-2',
        body: '{ "currency":"eur",\n "amount": 5 }',
        headers: { 'content-type': 'application/json' },
      })
      expect(reordered.headers.get('idempotent-replay')).toBe('true')
      const reused = await send('/payments', {
        key: 'k-2',
        ...json({ amount: 6, currency: 'eur' }),
      })
      expect(reused.status).toBe(422)
      expect(await reused.json()).toMatchObject({ code: 'KEY_REUSED' })
      expect(charges).toHaveLength(1)
    })

    it('releases the key after a 409 or a throw, as after a 5xx', async () => {
      const { send, routes } = await open()
      // A throw reaches the host: the fetch wrapper rethrows it, a server answers 500.
      const statusOf = (path: string) =>
        send(path, { key: `k-${path}` }).then(
          (response) => response.status,
          (error: Error) => error.message,
        )
      for (const path of ['/conflict', '/throw']) {
        const before = routes.mock.calls.length
        const one = await statusOf(path)
        const two = await statusOf(path)
        expect(routes.mock.calls.length - before).toBe(2)
        expect(two).toBe(one)
      }
    })

    it('replays a binary body byte for byte, and a response without a body as one', async () => {
      const { send } = await open()
      const first = new Uint8Array(await (await send('/binary', { key: 'k-6' })).arrayBuffer())
      const retry = await send('/binary', { key: 'k-6' })
      expect(new Uint8Array(await retry.arrayBuffer())).toEqual(first)
      expect(first[255]).toBe(255)
      await send('/empty', { key: 'k-7' })
      const empty = await send('/empty', { key: 'k-7' })
      expect(empty.status).toBe(204)
      expect(empty.headers.get('idempotent-replay')).toBe('true')
    })

    it('streams a body beyond maxResponseBytes whole to the first caller; its retries get 422 RESPONSE_NOT_STORED', async () => {
      const { send, routes } = await open({ adapter: { maxResponseBytes: 10_000 } })
      const first = await send('/stream?size=50000', { key: 'k-8' })
      const bytes = new Uint8Array(await first.arrayBuffer())
      expect(bytes.length).toBe(50_000)
      expect(bytes[49_999]).toBe(49_999 % 251)
      const retry = await send('/stream?size=50000', { key: 'k-8' })
      expect(retry.status).toBe(422)
      expect(await retry.json()).toMatchObject({ code: 'RESPONSE_NOT_STORED' })
      expect(routes).toHaveBeenCalledTimes(1)
      const small = await send('/stream?size=5000', { key: 'k-9' })
      const smallRetry = await send('/stream?size=5000', { key: 'k-9' })
      expect(await smallRetry.arrayBuffer()).toEqual(await small.arrayBuffer())
    })

    it('reads the key from a named header (webhook-id) or from getKey, and never both', async () => {
      const { send, charges } = await open({ adapter: { key: 'webhook-id' } })
      const delivery = () =>
        send('/payments', json({ amount: 3 }, { headers: { 'webhook-id': 'msg_1' } }))
      await delivery()
      const again = await delivery()
      expect(again.headers.get('idempotent-replay')).toBe('true')
      expect(charges).toHaveLength(1)
      const fromBody = await createHttpApp(transport, {
        adapter: { getKey: async (request) => ((await request.json()) as { id?: string }).id },
      })
      await fromBody.send('/payments', json({ id: 'evt_1', amount: 4 }))
      const replay = await fromBody.send('/payments', json({ id: 'evt_1', amount: 4 }))
      await fromBody.close()
      expect(replay.headers.get('idempotent-replay')).toBe('true')
      expect(fromBody.charges).toHaveLength(1)
    })
  })
})
