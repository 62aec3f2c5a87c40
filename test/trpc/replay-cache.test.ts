import { afterEach, describe, expect, it } from 'vitest'
import { createMemoryStore } from '../../src'
import { remoteStore } from '../support/remote-store'
import { createApp, serve, settle } from './fixtures'

// The engine's replay cache behind the tRPC middleware: a retry answered from the process's
// copy of the record is the same answer, with the same header, as one read from the store.
describe.each([false, true])('tRPC replays from the replay cache (superjson: %s)', (superjson) => {
  let close: (() => Promise<void>) | undefined
  afterEach(async () => {
    await close?.()
  })

  async function setup() {
    const store = remoteStore(createMemoryStore())
    const app = createApp({ superjson, store })
    const server = await serve(app, 'standalone')
    close = server.close
    return { app, server, store }
  }

  it('replays the value (with superjson: Dates, Maps, BigInts) and the header without a claim', async () => {
    const { app, server, store } = await setup()
    const { order } = server.client
    const call = superjson
      ? () => order.rich.mutate(undefined, { context: { key: 'k-1' } })
      : () => order.create.mutate({ name: 'pen' }, { context: { key: 'k-1' } })
    const first = await call()
    const replays = [await call(), await call()]
    expect(replays).toEqual([first, first])
    if (superjson) expect(first).toMatchObject({ at: new Date('2024-02-29T12:00:00.000Z') })
    expect(app.spies.rich.mock.calls.length + app.spies.create.mock.calls.length).toBe(1)
    expect(store.claim).toHaveBeenCalledTimes(1)
    expect(server.responses.map((r) => [r.status, r.replay])).toEqual([
      [200, null],
      [200, 'true'],
      [200, 'true'],
    ])
  })

  it('replays a recorded error with its status, code and formatted shape', async () => {
    const { app, server, store } = await setup()
    const call = () =>
      settle(server.client.order.reject.mutate({ name: 'pen' }, { context: { key: 'k-no' } }))
    const first = await call()
    const replays = [await call(), await call()]
    expect(first).toMatchObject({ ok: false, data: { code: 'BAD_REQUEST', httpStatus: 400 } })
    expect(replays).toEqual([first, first])
    expect(app.spies.reject).toHaveBeenCalledTimes(1)
    expect(store.claim).toHaveBeenCalledTimes(1)
    expect(server.responses.map((r) => [r.status, r.replay])).toEqual([
      [400, null],
      [400, 'true'],
      [400, 'true'],
    ])
  })

  it('answers another input under a copied key with 422 KEY_REUSED', async () => {
    const { app, server, store } = await setup()
    await server.client.order.create.mutate({ name: 'pen' }, { context: { key: 'k-2' } })
    const reused = await settle(
      server.client.order.create.mutate({ name: 'ink' }, { context: { key: 'k-2' } }),
    )
    expect(reused).toMatchObject({
      ok: false,
      data: { httpStatus: 422, idempotency: 'KEY_REUSED' },
    })
    expect(app.spies.create).toHaveBeenCalledTimes(1)
    expect(store.claim).toHaveBeenCalledTimes(1)
  })
})
