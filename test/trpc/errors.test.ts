import { afterEach, describe, expect, it } from 'vitest'
import { createMemoryStore, type IdempotencyStore } from '../../src'
import { type AppOptions, createApp, serve, settle } from './fixtures'

const quiet = { logger: { warn() {}, error() {} } }

/** A store that cannot be reached: every claim fails. */
function unreachableStore(): IdempotencyStore {
  const store = createMemoryStore()
  return { ...store, claim: () => Promise.reject(new Error('connection refused')) }
}

type Server = Awaited<ReturnType<typeof serve>>
type Client = Server['client']

const cases: {
  code: string
  trpcCode: string
  status: number
  /** Resolver runs before the failing call (a first call that sets the case up). */
  setupRuns: number
  options?: AppOptions
  act: (client: Client) => Promise<unknown>
}[] = [
  {
    code: 'KEY_REQUIRED',
    trpcCode: 'BAD_REQUEST',
    status: 400,
    setupRuns: 0,
    act: (client) => client.order.strict.mutate(),
  },
  {
    code: 'KEY_INVALID',
    trpcCode: 'BAD_REQUEST',
    status: 400,
    setupRuns: 0,
    act: (client) => client.order.create.mutate({ name: 'pen' }, { context: { key: 'k\u00e9y' } }),
  },
  {
    code: 'KEY_REUSED',
    trpcCode: 'UNPROCESSABLE_CONTENT',
    status: 422,
    setupRuns: 1,
    act: async (client) => {
      await client.order.create.mutate({ name: 'pen' }, { context: { key: 'e-1' } })
      return client.order.create.mutate({ name: 'ink' }, { context: { key: 'e-1' } })
    },
  },
  {
    code: 'RESPONSE_NOT_STORED',
    trpcCode: 'UNPROCESSABLE_CONTENT',
    status: 422,
    setupRuns: 1,
    options: { engine: { maxResponseBytes: 10 } },
    act: async (client) => {
      await client.order.create.mutate({ name: 'pen' }, { context: { key: 'e-2' } })
      return client.order.create.mutate({ name: 'pen' }, { context: { key: 'e-2' } })
    },
  },
  {
    code: 'STORE_UNAVAILABLE',
    trpcCode: 'SERVICE_UNAVAILABLE',
    status: 503,
    setupRuns: 0,
    options: { store: unreachableStore(), engine: quiet },
    act: (client) => client.order.create.mutate({ name: 'pen' }, { context: { key: 'e-3' } }),
  },
]

describe('engine errors through a tRPC fetch server', () => {
  let server: Server
  afterEach(() => server.close())

  it.each(cases)(
    '$code becomes $trpcCode with HTTP $status, the SPEC code in the cause, and nothing runs',
    async ({ code, trpcCode, status, setupRuns, options, act }) => {
      const app = createApp(options)
      server = await serve(app, 'fetch')
      const result = await settle(act(server.client))
      expect(result).toMatchObject({ ok: false, data: { code: trpcCode, httpStatus: status } })
      expect(result.ok || result.data.idempotency).toBe(code)
      expect(server.responses.at(-1)?.status).toBe(status)
      expect(app.spies.create).toHaveBeenCalledTimes(setupRuns)
    },
  )

  it('reads the IETF quoted header form and a bare token as the same key', async () => {
    const app = createApp()
    server = await serve(app, 'fetch')
    await server.client.order.create.mutate({ name: 'pen' }, { context: { key: '"e-4"' } })
    await server.client.order.create.mutate({ name: 'pen' }, { context: { key: 'e-4' } })
    expect(app.spies.create).toHaveBeenCalledTimes(1)
    expect(server.responses.at(-1)?.replay).toBe('true')
  })

  it('rejects a header key and an input key that differ with 400 KEY_INVALID, and runs nothing', async () => {
    const app = createApp()
    server = await serve(app, 'fetch')
    const result = await settle(
      server.client.order.create.mutate(
        { name: 'pen', idempotencyKey: 'e-5' },
        { context: { key: 'e-6' } },
      ),
    )
    expect(result).toMatchObject({
      ok: false,
      data: { httpStatus: 400, idempotency: 'KEY_INVALID' },
    })
    expect(app.spies.create).not.toHaveBeenCalled()
    const agreed = await settle(
      server.client.order.create.mutate(
        { name: 'pen', idempotencyKey: 'e-5' },
        { context: { key: 'e-5' } },
      ),
    )
    expect(agreed).toMatchObject({ ok: true })
  })
})
