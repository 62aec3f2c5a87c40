import { describe, expect, it } from 'vitest'
import { describeGraphQLBatchCases } from '../adapters/graphql-cases'
import { createFixture, createOrder, fetchClient, yogaHost } from './fixtures'

const body = { query: createOrder, variables: { item: 'book' } }

async function setup(options?: Parameters<typeof createFixture>[0]) {
  const fixture = createFixture(options)
  return { ...fixture, client: await fetchClient(fixture.yoga) }
}

describe('where useIdempotency finds the key', () => {
  it('accepts the IETF quoted form and a bare token as the same key', async () => {
    const { client, resolvers } = await setup()
    await client.post(body, { 'Idempotency-Key': '"8e03978e-40d5-43e8-bc93-6894a57f9324"' })
    const bare = await client.post(body, {
      'idempotency-key': '8e03978e-40d5-43e8-bc93-6894a57f9324',
    })
    expect(resolvers.createOrder).toHaveBeenCalledTimes(1)
    expect(bare.headers.get('idempotent-replay')).toBe('true')
  })

  it.each([
    ['a key with a space', 'two words'],
    ['an unterminated quoted key', '"open'],
    ['a key of 256 characters', 'k'.repeat(256)],
  ])(
    'answers %s with 400 IDEMPOTENCY_KEY_INVALID, runs nothing and leaves the store untouched',
    async (_name, key) => {
      const { client, resolvers, store } = await setup()
      const reply = await client.post(body, { 'idempotency-key': key })
      expect(reply.status).toBe(400)
      expect(reply.json.errors[0].extensions.code).toBe('IDEMPOTENCY_KEY_INVALID')
      expect(reply.json.errors[0].message).toMatch(/1-255 visible ASCII/)
      expect(resolvers.createOrder).not.toHaveBeenCalled()
      expect(store.claim).not.toHaveBeenCalled()
    },
  )

  it('leaves a query with a malformed key header untouched', async () => {
    const { client, resolvers } = await setup()
    const reply = await client.post({ query: '{ orders { id } }' }, { 'idempotency-key': 'a b' })
    expect(reply.status).toBe(200)
    expect(resolvers.orders).toHaveBeenCalledTimes(1)
  })

  it.each([
    [
      'an inline argument',
      { query: 'mutation { createOrder(item: "a", idempotencyKey: "k-1") { id } }' },
    ],
    [
      'an argument through a variable',
      {
        query: 'mutation ($key: String) { createOrder(item: "a", idempotencyKey: $key) { id } }',
        variables: { key: 'k-1' },
      },
    ],
    [
      'a field of an inline input object',
      {
        query:
          'mutation { placeOrder(input: { item: "a", quantity: 1, idempotencyKey: "k-1" }) { id } }',
      },
    ],
    [
      'a field of an input object variable',
      {
        query: 'mutation ($input: PlaceOrderInput!) { placeOrder(input: $input) { id } }',
        variables: { input: { item: 'a', quantity: 1, idempotencyKey: 'k-1' } },
      },
    ],
  ])('takes the key from %s', async (_name, request) => {
    const { client, resolvers, store } = await setup()
    await client.post(request)
    const second = await client.post(request)
    expect(resolvers.createOrder.mock.calls.length + resolvers.placeOrder.mock.calls.length).toBe(1)
    expect(second.headers.get('idempotent-replay')).toBe('true')
    expect(store.claim.mock.calls[0]?.[0].key).toBe('k-1')
  })

  it('accepts the same key from the header and the argument', async () => {
    const { client, resolvers } = await setup()
    const request = { query: 'mutation { createOrder(item: "a", idempotencyKey: "k-1") { id } }' }
    await client.post(request, { 'idempotency-key': 'k-1' })
    await client.post(request, { 'idempotency-key': 'k-1' })
    expect(resolvers.createOrder).toHaveBeenCalledTimes(1)
  })

  it.each([
    [
      'the header and the argument',
      { query: 'mutation { createOrder(item: "a", idempotencyKey: "k-1") { id } }' },
      { 'idempotency-key': 'k-2' },
    ],
    [
      'the header and the extensions',
      { ...body, extensions: { idempotencyKey: 'k-1' } },
      { 'idempotency-key': 'k-2' },
    ],
    [
      'two root fields',
      {
        query:
          'mutation { a: createOrder(item: "a", idempotencyKey: "k-1") { id } b: createOrder(item: "b", idempotencyKey: "k-2") { id } }',
      },
      {},
    ],
  ])(
    'answers different keys from %s with 400 IDEMPOTENCY_KEY_INVALID and runs nothing',
    async (_name, request, headers) => {
      const { client, resolvers, store } = await setup()
      const reply = await client.post(request, headers)
      expect(reply.status).toBe(400)
      expect(reply.json.errors[0].extensions.code).toBe('IDEMPOTENCY_KEY_INVALID')
      expect(reply.json.errors[0].message).toMatch(/two different keys/)
      expect(resolvers.createOrder).not.toHaveBeenCalled()
      expect(store.claim).not.toHaveBeenCalled()
    },
  )

  it('uses getKey instead of every other source', async () => {
    const { client, resolvers, store } = await setup({
      plugin: {
        getKey: ({ context, fieldNames }) =>
          `${fieldNames.join('+')}:${(context.request as Request).headers.get('x-request-id')}`,
      },
    })
    const request = {
      query: 'mutation { createOrder(item: "a", idempotencyKey: "ignored") { id } }',
    }
    await client.post(request, { 'x-request-id': 'r1', 'idempotency-key': 'also-ignored' })
    await client.post(request, { 'x-request-id': 'r1', 'idempotency-key': 'other' })
    await client.post(request, { 'x-request-id': 'r2' })
    expect(resolvers.createOrder).toHaveBeenCalledTimes(2)
    expect(store.claim.mock.calls.map(([input]) => input.key)).toEqual([
      'createOrder:r1',
      'createOrder:r1',
      'createOrder:r2',
    ])
  })

  it('runs a mutation without a key normally and records nothing', async () => {
    const { client, resolvers, store } = await setup()
    await client.post(body)
    await client.post(body)
    expect(resolvers.createOrder).toHaveBeenCalledTimes(2)
    expect(store.claim).not.toHaveBeenCalled()
  })

  it('fails the request, running nothing, when the scope function throws', async () => {
    const { client, resolvers, store } = await setup({
      plugin: {
        scope: () => {
          throw new Error('session store down')
        },
      },
    })
    const reply = await client.post(body, { 'idempotency-key': 'k-1' })
    expect(reply.json.errors[0].message).toBe('Unexpected error.')
    expect(reply.text).not.toContain('session store down')
    expect(resolvers.createOrder).not.toHaveBeenCalled()
    expect(store.claim).not.toHaveBeenCalled()
  })

  it('accepts an async scope function', async () => {
    const { client, store } = await setup({ plugin: { scope: async () => 'tenant-7' } })
    await client.post(body, { 'idempotency-key': 'k-1' })
    expect(JSON.parse(store.claim.mock.calls[0]![0].scope)).toEqual(['tenant-7', 'createOrder'])
  })
})

describeGraphQLBatchCases(yogaHost)
