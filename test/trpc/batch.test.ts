import { afterEach, describe, expect, it } from 'vitest'
import { type App, createApp, serve, settle } from './fixtures'

describe.each(['fetch', 'standalone'] as const)('httpBatchLink to the %s server', (transport) => {
  let app: App
  let server: Awaited<ReturnType<typeof serve>>
  const start = async () => {
    app = createApp({ superjson: true })
    server = await serve(app, transport, 'batch')
    return server.client.order
  }
  afterEach(() => server.close())

  it('applies a header key to each call under its own procedure path', async () => {
    const order = await start()
    const context = { key: 'b-1' }
    const [created, archived] = await Promise.all([
      order.create.mutate({ name: 'pen' }, { context }),
      order.archive.mutate({ name: 'ink' }, { context }),
    ])
    expect(server.responses).toHaveLength(1)
    expect(app.spies.create).toHaveBeenCalledTimes(2)
    const retry = await Promise.all([
      order.create.mutate({ name: 'pen' }, { context }),
      order.archive.mutate({ name: 'ink' }, { context }),
    ])
    expect(retry).toEqual([created, archived])
    expect(app.spies.create).toHaveBeenCalledTimes(2)
    expect(server.responses[1]?.replay).toBe('true')
  })

  it('treats two calls of one procedure under one header key as one operation: the second replays', async () => {
    const order = await start()
    const context = { key: 'b-2' }
    const [first, second] = await Promise.all([
      order.create.mutate({ name: 'pen' }, { context }),
      order.create.mutate({ name: 'pen' }, { context }),
    ])
    expect(server.responses).toHaveLength(1)
    expect(second).toEqual(first)
    expect(app.spies.create).toHaveBeenCalledTimes(1)
    expect(server.responses[0]).toMatchObject({ status: 200, replay: 'true' })
  })

  it.each([
    ['a percent-escaped value', 'batch=%31', 'b-encoded-value'],
    ['a percent-escaped name', '%62atch=1', 'b-encoded-name'],
  ])(
    'knows a batch whose query has %s: the second call of one key still replays',
    async (_, query, key) => {
      await start()
      // tRPC reads the query with URLSearchParams, which decodes names and values alike.
      const input = { json: { name: 'pen' } }
      const response = await server.fetch(`${server.url}/order.create,order.create?${query}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify({ 0: input, 1: input }),
      })
      const [first, second] = (await response.json()) as Array<{ result: unknown }>
      expect(response.status).toBe(200)
      expect(second).toEqual(first)
      expect(app.spies.create).toHaveBeenCalledTimes(1)
    },
  )

  it('answers the second call with 422 KEY_REUSED when its input differs, and runs only the first', async () => {
    const order = await start()
    const context = { key: 'b-3' }
    const [first, second] = await Promise.all([
      settle(order.create.mutate({ name: 'pen' }, { context })),
      settle(order.create.mutate({ name: 'ink' }, { context })),
    ])
    expect(first).toMatchObject({ ok: true, value: { name: 'pen' } })
    expect(second).toMatchObject({
      ok: false,
      data: { httpStatus: 422, idempotency: 'KEY_REUSED' },
    })
    expect(server.responses[0]?.status).toBe(207)
    expect(app.spies.create).toHaveBeenCalledTimes(1)
  })

  it('runs per-call input keys once each and replays each to its own retry', async () => {
    const order = await start()
    const batch = () =>
      Promise.all([
        order.create.mutate({ name: 'pen', idempotencyKey: 'b-4a' }),
        order.create.mutate({ name: 'ink', idempotencyKey: 'b-4b' }),
        order.create.mutate({ name: 'cap' }),
      ])
    const first = await batch()
    const retry = await batch()
    expect(server.responses).toHaveLength(2)
    expect(retry.slice(0, 2)).toEqual(first.slice(0, 2))
    // Two keyed calls ran once each; the unkeyed one ran in both batches.
    expect(app.spies.create.mock.calls.map(([input]) => input.name).sort()).toEqual([
      'cap',
      'cap',
      'ink',
      'pen',
    ])
  })

  it('rejects a call whose input key differs from the batch header key with 400 KEY_INVALID', async () => {
    const order = await start()
    const context = { key: 'b-5' }
    const [agreeing, disagreeing] = await Promise.all([
      settle(order.create.mutate({ name: 'pen', idempotencyKey: 'b-5' }, { context })),
      settle(order.archive.mutate({ name: 'ink', idempotencyKey: 'other' }, { context })),
    ])
    expect(agreeing).toMatchObject({ ok: true })
    expect(disagreeing).toMatchObject({
      ok: false,
      data: { httpStatus: 400, idempotency: 'KEY_INVALID' },
    })
    expect(app.spies.create).toHaveBeenCalledTimes(1)
  })
})

describe.each(['fetch', 'standalone'] as const)(
  'httpBatchStreamLink to the %s server',
  (transport) => {
    it('still runs a keyed mutation once and replays it, though no replay header can be sent', async () => {
      const app = createApp({ superjson: true })
      const server = await serve(app, transport, 'batch-stream')
      try {
        const call = () => server.client.order.rich.mutate(undefined, { context: { key: 's-1' } })
        const first = await call()
        const retry = await call()
        expect(retry).toEqual(first)
        expect(retry.at).toBeInstanceOf(Date)
        expect(app.spies.rich).toHaveBeenCalledTimes(1)
        // Streamed responses send their headers before any call ends (see the README, tRPC batching).
        expect(server.responses.map((r) => r.replay)).toEqual([null, null])
      } finally {
        await server.close()
      }
    })
  },
)
