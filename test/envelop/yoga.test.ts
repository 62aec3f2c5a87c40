import { afterEach, describe, expect, it } from 'vitest'
import { type Client, createFixture, createOrder, transports } from './fixtures'

// The contract's rows (a keyed mutation runs once and replays, 422, 409, failures, scopes) run
// through these same transports in test/adapters/behaviour.test.ts; here, what only GraphQL has.
describe.each(transports)('useIdempotency in GraphQL Yoga through %s', (_name, connect) => {
  let client: Client | undefined
  afterEach(async () => {
    await client?.close()
    client = undefined
  })
  const setup = async (options?: Parameters<typeof createFixture>[0]) => {
    const fixture = createFixture(options)
    client = await connect(fixture.yoga)
    return { ...fixture, client }
  }
  const body = { query: createOrder, variables: { item: 'book', quantity: 2 } }

  it('replays a reformatted document with the same meaning', async () => {
    const { client, resolvers } = await setup()
    const first = await client.post(body, { 'idempotency-key': 'order-1' })
    const reformatted = {
      query: `# the same operation, written differently
        mutation CreateOrder($item: String!, $quantity: Int) { createOrder(item: $item, quantity: $quantity) { id, item, quantity } }
        query Unrelated { orders { id } }`,
      operationName: 'CreateOrder',
      variables: { quantity: 2, item: 'book' },
    }
    const second = await client.post(reformatted, { 'idempotency-key': 'order-1' })
    expect(resolvers.createOrder).toHaveBeenCalledTimes(1)
    expect(second.text).toBe(first.text)
    expect(second.headers.get('idempotent-replay')).toBe('true')
  })

  it('answers a changed selection set under the same key with 422', async () => {
    const { client, resolvers } = await setup()
    await client.post(body, { 'idempotency-key': 'order-1' })
    const changed = await client.post(
      { query: createOrder.replace('quantity\n', ''), variables: body.variables },
      { 'idempotency-key': 'order-1' },
    )
    expect(changed.status).toBe(422)
    expect(resolvers.createOrder).toHaveBeenCalledTimes(1)
  })

  it('takes the key from the idempotencyKey argument without a header', async () => {
    const { client, resolvers } = await setup()
    const withArgument = {
      query: 'mutation ($k: String) { createOrder(item: "pen", idempotencyKey: $k) { id } }',
      variables: { k: 'arg-key-1' },
    }
    await client.post(withArgument)
    const second = await client.post(withArgument)
    expect(resolvers.createOrder).toHaveBeenCalledTimes(1)
    expect(second.headers.get('idempotent-replay')).toBe('true')
  })

  it('takes the key from the request extensions without a header', async () => {
    const { client, resolvers } = await setup()
    const withExtension = { ...body, extensions: { idempotencyKey: 'ext-key-1' } }
    await client.post(withExtension)
    const second = await client.post(withExtension)
    expect(resolvers.createOrder).toHaveBeenCalledTimes(1)
    expect(second.headers.get('idempotent-replay')).toBe('true')
  })

  it('answers a required field called without a key with 400 IDEMPOTENCY_KEY_REQUIRED and does not run it', async () => {
    const { client, resolvers } = await setup()
    const reply = await client.post({ query: 'mutation { chargeCard(amount: 5) }' })
    expect(reply.status).toBe(400)
    expect(reply.json.errors[0].extensions).toEqual({ code: 'IDEMPOTENCY_KEY_REQUIRED' })
    expect(reply.json.errors[0].message).toMatch(/requires an Idempotency-Key/)
    expect(resolvers.chargeCard).not.toHaveBeenCalled()
  })

  it('masks an unexpected error on both attempts and runs the resolver again on the retry', async () => {
    const { client, resolvers, store } = await setup()
    const failing = { query: 'mutation { failUnexpectedly { id } }' }
    const first = await client.post(failing, { 'idempotency-key': 'fail-1' })
    const second = await client.post(failing, { 'idempotency-key': 'fail-1' })
    expect(resolvers.failUnexpectedly).toHaveBeenCalledTimes(2)
    for (const reply of [first, second]) {
      expect(reply.json.errors[0].message).toBe('Unexpected error.')
      expect(reply.text).not.toContain('hunter2')
      expect(reply.headers.get('idempotent-replay')).toBeNull()
    }
    expect(second.text).toBe(first.text)
    expect(store.release).toHaveBeenCalledTimes(2)
    expect(store.complete).not.toHaveBeenCalled()
  })

  it('records an expected GraphQLError and replays it identically, status and locations included', async () => {
    const { client, resolvers } = await setup()
    const rejecting = {
      query: 'mutation Reject {\n  rejectOrder(reason: "out of stock") { id }\n}',
    }
    const first = await client.post(rejecting, { 'idempotency-key': 'reject-1' })
    const second = await client.post(rejecting, { 'idempotency-key': 'reject-1' })
    expect(resolvers.rejectOrder).toHaveBeenCalledTimes(1)
    expect(first.json.errors).toEqual([
      {
        message: 'Order rejected: out of stock',
        locations: [{ line: 2, column: 3 }],
        path: ['rejectOrder'],
        extensions: { code: 'ORDER_REJECTED' },
      },
    ])
    expect(second.status).toBe(first.status)
    expect(second.text).toBe(first.text)
    expect(second.headers.get('idempotent-replay')).toBe('true')
  })
})
