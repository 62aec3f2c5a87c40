import type { GraphQLError, GraphQLSchema } from 'graphql'
import { createSchema } from 'graphql-yoga'
import { describe, expect, it, vi } from 'vitest'
import { idempotentDirectiveTypeDefs } from '../../adapters/graphql'
import type { IdempotencyOptions, Logger } from '../../src'
import {
  type Client,
  codeFirstSchema,
  type createFixture,
  createOrder,
  type GraphQLBody,
  typeDefs,
} from '../envelop/fixtures'

/** What a case may ask of a host: the plugin's failure options, the engine, a schema, batching. */
export interface HostOptions {
  plugin?: {
    storeErrors?: (error: GraphQLError) => boolean
    logger?: Logger
    mode?: 'all' | 'marked'
  }
  engine?: Omit<IdempotencyOptions, 'store'>
  schema?: GraphQLSchema
  /** Batched HTTP requests on (Yoga `batching`, Apollo `allowBatchedHttpRequests`). */
  batching?: boolean
  /**
   * `'custom'`: unexpected errors reach the client as {@link maskedMessage} (Yoga's
   * `maskedErrors.errorMessage`, Apollo's `formatError`); `'off'`: as they are (Yoga
   * `maskedErrors: false`, Apollo's default). @default the server's default
   */
  masking?: 'custom' | 'off'
}

/** The message a server masking with `masking: 'custom'` gives unexpected errors. */
export const maskedMessage = 'Something broke, try again.'

/**
 * A GraphQL server (Yoga, Apollo Server) over the test schema with the idempotency plugin,
 * behind a client. The cases below are what both must do alike; what differs (masking, where
 * statuses come from) stays in each host's own files.
 */
export interface GraphQLHost {
  name: string
  setup(options?: HostOptions): Promise<
    Pick<ReturnType<typeof createFixture>, 'resolvers' | 'store' | 'gate'> & {
      client: Client
    }
  >
  /** The headers a client sends to be answered incrementally, if the server needs any. */
  incrementalAccept: Record<string, string>
}

const keyed = (key: string) => ({ 'idempotency-key': key })
const rejecting = (reason: string, status?: number): GraphQLBody => ({
  query: `mutation { rejectOrder(reason: "${reason}"${status ? `, status: ${status}` : ''}) { id } }`,
})

/** Masking, the failure policy and incremental delivery, on `host`. */
export function describeGraphQLFailureCases(host: GraphQLHost): void {
  const failing = { query: 'mutation { failUnexpectedly { id } }' }

  describe(`${host.name}: masked errors`, () => {
    it('masks with the server own message on both attempts and runs the resolver each time', async () => {
      const { client, resolvers } = await host.setup({ masking: 'custom' })
      const first = await client.post(failing, keyed('f-1'))
      const second = await client.post(failing, keyed('f-1'))
      expect(first.json.errors[0].message).toBe(maskedMessage)
      expect(second.text).toBe(first.text)
      expect(resolvers.failUnexpectedly).toHaveBeenCalledTimes(2)
    })

    it('records an unexpected error that storeErrors keeps in its masked form only', async () => {
      const { client, resolvers } = await host.setup({
        masking: 'custom',
        plugin: { storeErrors: () => true },
      })
      const first = await client.post(failing, keyed('f-2'))
      const second = await client.post(failing, keyed('f-2'))
      expect(resolvers.failUnexpectedly).toHaveBeenCalledTimes(1)
      expect(second.headers.get('idempotent-replay')).toBe('true')
      expect(second.status).toBe(first.status)
      expect(second.text).toBe(first.text)
      expect(second.text).toContain(maskedMessage)
      expect(second.text).not.toContain('hunter2')
    })

    it('releases the key for an unexpected error when the server does not mask', async () => {
      const { client, resolvers, store } = await host.setup({ masking: 'off' })
      const first = await client.post(failing, keyed('f-3'))
      const second = await client.post(failing, keyed('f-3'))
      expect(first.text).toContain('hunter2')
      expect(second.headers.get('idempotent-replay')).toBeNull()
      expect(resolvers.failUnexpectedly).toHaveBeenCalledTimes(2)
      expect(store.complete).not.toHaveBeenCalled()
    })
  })

  describe(`${host.name}: errors of the operation itself`, () => {
    it('calls storeErrors with each error and records only when every call says yes', async () => {
      const storeErrors = vi.fn((error: GraphQLError) => error.message.endsWith('keep'))
      const { client, resolvers } = await host.setup({ plugin: { storeErrors } })
      const two = {
        query:
          'mutation { a: rejectOrder(reason: "keep") { id } b: rejectOrder(reason: "drop") { id } }',
      }
      await client.post(two, keyed('two-1'))
      await client.post(two, keyed('two-1'))
      expect(resolvers.rejectOrder).toHaveBeenCalledTimes(4)
      expect(storeErrors.mock.calls[0]![0].message).toBe('Order rejected: keep')
      expect(storeErrors.mock.calls[0]![0].path).toEqual(['a'])

      const one = rejecting('keep')
      await client.post(one, keyed('one-1'))
      const replay = await client.post(one, keyed('one-1'))
      expect(resolvers.rejectOrder).toHaveBeenCalledTimes(5)
      expect(replay.headers.get('idempotent-replay')).toBe('true')
    })

    it('releases the key when storeErrors throws, logs it, and answers the result as it was', async () => {
      const logger = { warn: vi.fn(), error: vi.fn() }
      const storeErrors = () => {
        throw new Error('the policy broke')
      }
      const { client, resolvers } = await host.setup({ plugin: { storeErrors, logger } })
      const first = await client.post(rejecting('no'), keyed('thrown-1'))
      const second = await client.post(rejecting('no'), keyed('thrown-1'))
      expect(resolvers.rejectOrder).toHaveBeenCalledTimes(2)
      expect(second.headers.get('idempotent-replay')).toBeNull()
      expect(second.text).toBe(first.text)
      expect(first.json.errors[0].message).toBe('Order rejected: no')
      expect(logger.error).toHaveBeenCalledWith(
        'storeErrors threw; the key is released',
        expect.objectContaining({ message: 'the policy broke' }),
      )
    })

    it('replays an expected error with its own HTTP status (extensions.http), which stays out of the body', async () => {
      const { client, resolvers } = await host.setup()
      const first = await client.post(rejecting('gone', 404), keyed('r-404'))
      const second = await client.post(rejecting('gone', 404), keyed('r-404'))
      expect(first.status).toBe(404)
      expect(second.status).toBe(404)
      expect(second.headers.get('idempotent-replay')).toBe('true')
      expect(second.text).toBe(first.text)
      expect(first.json.errors[0].extensions).toEqual({ code: 'ORDER_REJECTED' })
      expect(resolvers.rejectOrder).toHaveBeenCalledTimes(1)
    })

    it.each([503, 429, 409, 408])(
      'releases the key for an expected error with status %i, so a retry runs again',
      async (status) => {
        const { client, resolvers, store } = await host.setup()
        const first = await client.post(rejecting('busy', status), keyed('r-busy'))
        await client.post(rejecting('busy', status), keyed('r-busy'))
        expect(first.status).toBe(status)
        expect(resolvers.rejectOrder).toHaveBeenCalledTimes(2)
        expect(store.complete).not.toHaveBeenCalled()
      },
    )
  })

  describe(`${host.name}: incremental delivery`, () => {
    const deferTypeDefs = `directive @defer(if: Boolean, label: String) on FRAGMENT_SPREAD | INLINE_FRAGMENT
      directive @stream(if: Boolean, label: String, initialCount: Int = 0) on FIELD`
    const deferred = { query: 'mutation { createOrder(item: "a") { id ... @defer { item } } }' }

    async function setupDefer() {
      const createOrder = vi.fn(() => ({ id: '1', item: 'a', quantity: 1 }))
      const schema = createSchema({
        typeDefs: [idempotentDirectiveTypeDefs, deferTypeDefs, typeDefs],
        resolvers: { Mutation: { createOrder } },
      })
      return { ...(await host.setup({ schema })), createOrder }
    }

    it('refuses a keyed mutation that uses @defer with 400, runs nothing and records nothing', async () => {
      const { client, createOrder, store } = await setupDefer()
      const reply = await client.post(deferred, keyed('d-1'))
      expect(reply.status).toBe(400)
      expect(reply.json.errors[0].extensions).toEqual({
        code: 'IDEMPOTENCY_INCREMENTAL_DELIVERY_UNSUPPORTED',
      })
      expect(createOrder).not.toHaveBeenCalled()
      expect(store.claim).not.toHaveBeenCalled()
    })

    it('runs a @defer mutation without a key as usual', async () => {
      const { client, createOrder } = await setupDefer()
      const reply = await client.post(deferred, host.incrementalAccept)
      expect(reply.status).toBe(200)
      expect(reply.text).toContain('"item":"a"')
      expect(createOrder).toHaveBeenCalledTimes(1)
    })
  })
}

/** Batched HTTP requests, each operation on its own, on `host`. */
export function describeGraphQLBatchCases(host: GraphQLHost): void {
  const body = { query: createOrder, variables: { item: 'book' } }

  describe(`${host.name}: batched requests`, () => {
    it('uses each operation extensions key on its own, and replays only the repeated one', async () => {
      const { client, resolvers } = await host.setup({ batching: true })
      const first = await client.post([
        { ...body, extensions: { idempotencyKey: 'batch-1' } },
        { ...body, extensions: { idempotencyKey: 'batch-2' } },
      ])
      expect(resolvers.createOrder).toHaveBeenCalledTimes(2)
      expect(first.headers.get('idempotent-replay')).toBeNull()
      const second = await client.post([
        { ...body, extensions: { idempotencyKey: 'batch-2' } },
        { ...body, extensions: { idempotencyKey: 'batch-3' } },
      ])
      expect(resolvers.createOrder).toHaveBeenCalledTimes(3)
      expect(second.json[0]).toEqual(first.json[1])
      expect(second.json[1].data.createOrder.id).toBe('3')
      expect(second.headers.get('idempotent-replay')).toBe('true')
    })

    it('treats two operations of one batch under one header key as one operation', async () => {
      // The resolver is held until the duplicate has been answered, so the two overlap for sure.
      let releaseResolver = () => {}
      const { client, resolvers, gate } = await host.setup({
        batching: true,
        engine: { onEvent: (event) => event.type === 'conflict' && releaseResolver() },
      })
      releaseResolver = gate.open
      const slow = { query: 'mutation { slowOrder(item: "lamp") { item } }' }
      const reply = await client.post([slow, slow], keyed('batch-h'))
      expect(resolvers.slowOrder).toHaveBeenCalledTimes(1)
      const ran = reply.json.filter((r: { data?: unknown }) => r.data)
      const refused = reply.json.filter((r: { errors?: unknown }) => r.errors)
      expect(ran).toEqual([{ data: { slowOrder: { item: 'lamp' } } }])
      expect(refused[0].errors[0].extensions).toEqual({
        code: 'IDEMPOTENCY_IN_PROGRESS',
        retryAfter: 1,
      })
    })
  })
}

/** The schema's options (`@idempotent`, code-first `extensions`) and `mode`, on `host`. */
export function describeGraphQLSchemaCases(host: GraphQLHost): void {
  const body = { query: createOrder, variables: { item: 'book' } }

  describe(`${host.name}: schema options`, () => {
    it('requires a key for a code-first field with extensions.idempotency.required', async () => {
      const { schema, pay } = codeFirstSchema({ required: true })
      const { client } = await host.setup({ schema })
      const reply = await client.post({ query: 'mutation { pay(amount: 3) }' })
      expect(reply.status).toBe(400)
      expect(reply.json.errors[0].extensions.code).toBe('IDEMPOTENCY_KEY_REQUIRED')
      expect(pay).not.toHaveBeenCalled()
    })

    it("deduplicates only marked mutations in mode 'marked'", async () => {
      const { client, resolvers, store } = await host.setup({ plugin: { mode: 'marked' } })
      for (let i = 0; i < 2; i++) {
        await client.post(body, keyed('m-1'))
        await client.post({ query: 'mutation { sendEmail(to: "a@example.com") }' }, keyed('m-2'))
      }
      expect(resolvers.createOrder).toHaveBeenCalledTimes(2)
      expect(resolvers.sendEmail).toHaveBeenCalledTimes(1)
      expect(store.claim.mock.calls.map(([input]) => input.key)).toEqual(['m-2', 'm-2'])
    })
  })
}
