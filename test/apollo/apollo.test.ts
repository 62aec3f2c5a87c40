import type { ApolloServerPlugin } from '@apollo/server'
import { createSchema } from 'graphql-yoga'
import { describe, expect, it, vi } from 'vitest'
import { idempotencyPlugin, idempotentDirectiveTypeDefs } from '../../adapters/apollo'
import { describeGraphQLBatchCases, describeGraphQLSchemaCases } from '../adapters/graphql-cases'
import { createOrder } from '../envelop/fixtures'
import {
  apolloHost,
  type Context,
  createApolloFixture,
  fetchClient,
  operationClient,
} from './fixtures'

const body = { query: createOrder, variables: { item: 'book', quantity: 1 } }
const keyed = (key: string) => ({ 'idempotency-key': key })
/** Apollo logs a request that failed past every hook; these tests make some on purpose. */
const quietApollo = { debug() {}, info() {}, warn() {}, error() {} }

async function setup(options?: Parameters<typeof createApolloFixture>[0]) {
  const fixture = createApolloFixture(options)
  return { ...fixture, client: await fetchClient(fixture.server) }
}

describe('idempotencyPlugin in Apollo Server', () => {
  it('replays a reformatted document, locations included, and refuses a changed selection with 422', async () => {
    const { client, resolvers } = await setup()
    const rejecting = 'mutation { rejectOrder(reason: "no") { id } }'
    const first = await client.post({ query: rejecting }, keyed('fmt-1'))
    const reformatted = await client.post(
      { query: `# a comment\nmutation {\n  rejectOrder(reason: "no") {\n    id\n  }\n}` },
      keyed('fmt-1'),
    )
    expect(first.json.errors[0].locations).toEqual([{ line: 1, column: 12 }])
    expect(reformatted.headers.get('idempotent-replay')).toBe('true')
    expect(reformatted.text).toBe(first.text)
    const changed = await client.post(
      { query: 'mutation { rejectOrder(reason: "no") { id item } }' },
      keyed('fmt-1'),
    )
    expect(changed.status).toBe(422)
    expect(changed.json.errors[0].extensions.code).toBe('IDEMPOTENCY_KEY_REUSED')
    expect(resolvers.rejectOrder).toHaveBeenCalledTimes(1)
  })

  it.each([
    [
      'the idempotencyKey argument',
      { query: 'mutation { createOrder(item: "a", idempotencyKey: "k-1") { id } }' },
    ],
    ['the request extensions', { ...body, extensions: { idempotencyKey: 'k-1' } }],
  ])('takes the key from %s without a header', async (_name, request) => {
    const { client, resolvers, store } = await setup()
    await client.post(request)
    const second = await client.post(request)
    expect(resolvers.createOrder).toHaveBeenCalledTimes(1)
    expect(second.headers.get('idempotent-replay')).toBe('true')
    expect(store.claim.mock.calls[0]?.[0].key).toBe('k-1')
  })

  it('answers two different keys (header and extensions) with 400 IDEMPOTENCY_KEY_INVALID and runs nothing', async () => {
    const { client, resolvers, store } = await setup()
    const reply = await client.post(
      { ...body, extensions: { idempotencyKey: 'k-1' } },
      keyed('k-2'),
    )
    expect(reply.status).toBe(400)
    expect(reply.json).toEqual({
      errors: [
        {
          message: expect.stringMatching(/two different keys/),
          extensions: { code: 'IDEMPOTENCY_KEY_INVALID' },
        },
      ],
    })
    expect(resolvers.createOrder).not.toHaveBeenCalled()
    expect(store.claim).not.toHaveBeenCalled()
  })

  it('leaves a request whose operationName names no operation to Apollo, which answers 400', async () => {
    const { client, resolvers, store } = await setup()
    const reply = await client.post({ ...body, operationName: 'Missing' }, keyed('k-1'))
    expect(reply.status).toBe(400)
    expect(reply.json.errors[0].extensions.code).toBe('OPERATION_RESOLUTION_FAILURE')
    expect(resolvers.createOrder).not.toHaveBeenCalled()
    expect(store.claim).not.toHaveBeenCalled()
  })

  it('leaves queries untouched, a malformed key header included', async () => {
    const { client, resolvers, store } = await setup()
    const reply = await client.post({ query: '{ orders { id } }' }, keyed('a b'))
    expect(reply.status).toBe(200)
    expect(resolvers.orders).toHaveBeenCalledTimes(1)
    expect(store.claim).not.toHaveBeenCalled()
  })

  it('reads @idempotent from the schema Apollo serves: a required field without a key gets 400, a ttl ends the replay', async () => {
    const { client, resolvers, idempotency } = await setup()
    const charge = await client.post({ query: 'mutation { chargeCard(amount: 5) }' })
    expect(charge.status).toBe(400)
    expect(charge.json.errors[0].extensions.code).toBe('IDEMPOTENCY_KEY_REQUIRED')
    expect(resolvers.chargeCard).not.toHaveBeenCalled()
    const begin = vi.spyOn(idempotency, 'begin')
    await client.post({ query: 'mutation { sendEmail(to: "a@example.com") }' }, keyed('mail-1'))
    expect(begin.mock.calls[0]?.[0]).toMatchObject({ operation: 'sendEmail', ttl: 30_000 })
  })

  it('fails when the server starts, naming the field, on a malformed schema option', async () => {
    const schema = createSchema({
      typeDefs: [
        idempotentDirectiveTypeDefs,
        'type Query { ok: String } type Mutation { pay: Int @idempotent(ttl: -1) }',
      ],
    })
    const { server } = createApolloFixture({ schema })
    await expect(server.start()).rejects.toThrow(/Mutation\.pay must be a non-negative/)
  })

  it('rejects an unknown mode and a missing engine when the plugin is created', () => {
    expect(() => createApolloFixture({ plugin: { mode: 'some' as never } })).toThrow(
      /mode must be 'all' or 'marked'/,
    )
    expect(() => idempotencyPlugin({} as never)).toThrow(/idempotencyPlugin needs `idempotency`/)
  })

  it('fails the request with a 500, running nothing, when the scope function throws', async () => {
    const { client, resolvers, store } = await setup({
      apollo: { logger: quietApollo },
      plugin: {
        scope: () => {
          throw new Error('session store down')
        },
      },
    })
    const reply = await client.post(body, keyed('k-1'))
    expect(reply.status).toBe(500)
    expect(reply.text).not.toContain('session store down')
    expect(resolvers.createOrder).not.toHaveBeenCalled()
    expect(store.claim).not.toHaveBeenCalled()
  })

  it('releases the key when the pipeline throws after the claim, so a retry runs at once instead of 409', async () => {
    const breaks = vi.fn()
    const breaking: ApolloServerPlugin<Context> = {
      async requestDidStart() {
        return {
          async executionDidStart() {
            breaks()
            if (breaks.mock.calls.length === 1) throw new Error('a plugin broke')
          },
        }
      },
    }
    const { client, resolvers, store } = await setup({
      apollo: { plugins: [breaking], logger: quietApollo },
    })
    const first = await client.post(body, keyed('k-broken'))
    expect(first.status).toBe(500)
    expect(store.release).toHaveBeenCalledTimes(1)
    const retry = await client.post(body, keyed('k-broken'))
    expect(retry.status).toBe(200)
    expect(retry.headers.get('idempotent-replay')).toBeNull()
    expect(resolvers.createOrder).toHaveBeenCalledTimes(1)
  })

  it('takes the key from extensions in server.executeOperation, and marks the replay in response.http', async () => {
    const fixture = createApolloFixture()
    const request = { ...body, extensions: { idempotencyKey: 'op-1' } }
    const first = await fixture.server.executeOperation(request, { contextValue: {} })
    const retry = await fixture.server.executeOperation(request, { contextValue: {} })
    expect(fixture.resolvers.createOrder).toHaveBeenCalledTimes(1)
    expect(retry.http.headers.get('idempotent-replay')).toBe('true')
    expect(retry.body).toEqual(first.body)
    // The operation client of the behaviour table reads the same through this path.
    const client = await operationClient(fixture.server)
    expect((await client.post(body, keyed('op-1'))).headers.get('idempotent-replay')).toBe('true')
    await client.close()
  })
})

describe('idempotencyPlugin with batched HTTP requests (allowBatchedHttpRequests)', () => {
  const batching = { apollo: { allowBatchedHttpRequests: true } }

  it('records each operation with its own status, not the batch status another one set', async () => {
    // The slow operation is held until the 404 one is recorded: the batch head says 404 by then.
    let releaseResolver = () => {}
    const { client, resolvers, gate } = await setup({
      ...batching,
      engine: {
        onEvent: (event) => event.type === 'executed' && event.key === 'own-1' && releaseResolver(),
      },
    })
    releaseResolver = gate.open
    const gone = { query: 'mutation { rejectOrder(reason: "gone", status: 404) { id } }' }
    const slow = { query: 'mutation { slowOrder(item: "lamp") { item } }' }
    const held = { ...slow, extensions: { idempotencyKey: 'own-2' } }
    const batch = await client.post([{ ...gone, extensions: { idempotencyKey: 'own-1' } }, held])
    expect(batch.status).toBe(404)
    const alone = await client.post(slow, keyed('own-2'))
    expect(alone.status).toBe(200)
    expect(alone.headers.get('idempotent-replay')).toBe('true')
    expect(alone.json).toEqual(batch.json[1])
    const goneAlone = await client.post(gone, keyed('own-1'))
    expect(goneAlone.status).toBe(404)
    expect(goneAlone.json).toEqual(batch.json[0])
    expect(resolvers.slowOrder).toHaveBeenCalledTimes(1)
  })
})

describeGraphQLBatchCases(apolloHost)
describeGraphQLSchemaCases(apolloHost)
