import { afterEach, describe, expect, it } from 'vitest'
import { type Client, createFixture, createOrder, transports } from './fixtures'

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

  it('runs a mutation sent twice with one key once, and replays an identical body with the replay header', async () => {
    const { client, resolvers } = await setup()
    const first = await client.post(body, { 'idempotency-key': 'order-1' })
    const second = await client.post(body, { 'idempotency-key': 'order-1' })
    expect(resolvers.createOrder).toHaveBeenCalledTimes(1)
    expect(first.status).toBe(200)
    expect(first.json).toEqual({ data: { createOrder: { id: '1', item: 'book', quantity: 2 } } })
    expect(first.headers.get('idempotent-replay')).toBeNull()
    expect(second.status).toBe(first.status)
    expect(second.text).toBe(first.text)
    expect(second.headers.get('idempotent-replay')).toBe('true')
  })

  it('runs a mutation again under a new key', async () => {
    const { client, resolvers } = await setup()
    await client.post(body, { 'idempotency-key': 'order-1' })
    const other = await client.post(body, { 'idempotency-key': 'order-2' })
    expect(resolvers.createOrder).toHaveBeenCalledTimes(2)
    expect(other.json.data.createOrder.id).toBe('2')
  })

  it('runs a query sent with a key every time and never calls the store', async () => {
    const { client, resolvers, store } = await setup()
    const query = { query: '{ orders { id } }' }
    await client.post(query, { 'idempotency-key': 'q-1' })
    const second = await client.post(query, { 'idempotency-key': 'q-1' })
    expect(resolvers.orders).toHaveBeenCalledTimes(2)
    expect(second.headers.get('idempotent-replay')).toBeNull()
    expect(store.claim).not.toHaveBeenCalled()
  })

  it('answers a key reused with other variables with 422 IDEMPOTENCY_KEY_REUSED and does not run it', async () => {
    const { client, resolvers } = await setup()
    await client.post(body, { 'idempotency-key': 'order-1' })
    const reused = await client.post(
      { query: createOrder, variables: { item: 'book', quantity: 3 } },
      { 'idempotency-key': 'order-1' },
    )
    expect(reused.status).toBe(422)
    expect(reused.json.errors[0].extensions).toEqual({ code: 'IDEMPOTENCY_KEY_REUSED' })
    expect(reused.json.data).toBeUndefined()
    expect(resolvers.createOrder).toHaveBeenCalledTimes(1)
  })

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

  it('answers concurrent duplicates with 409 and Retry-After while the first runs, and runs it once', async () => {
    const { client, resolvers, gate } = await setup()
    const duplicates = 8
    const slow = { query: 'mutation { slowOrder(item: "lamp") { id item } }' }
    let answered = 0
    let allButOneAnswered!: () => void
    const waiting = new Promise<void>((resolve) => {
      allButOneAnswered = resolve
    })
    const replies = Array.from({ length: duplicates }, () =>
      client.post(slow, { 'idempotency-key': 'slow-1' }).then((reply) => {
        if (++answered === duplicates - 1) allButOneAnswered()
        return reply
      }),
    )
    await waiting
    gate.open()
    const all = await Promise.all(replies)
    const conflicts = all.filter((reply) => reply.status === 409)
    expect(conflicts).toHaveLength(duplicates - 1)
    for (const conflict of conflicts) {
      expect(conflict.headers.get('retry-after')).toBe('1')
      expect(conflict.json.errors[0].extensions).toEqual({
        code: 'IDEMPOTENCY_IN_PROGRESS',
        retryAfter: 1,
      })
    }
    const winner = all.find((reply) => reply.status === 200)!
    expect(winner.json.data.slowOrder.item).toBe('lamp')
    expect(resolvers.slowOrder).toHaveBeenCalledTimes(1)
    const retry = await client.post(slow, { 'idempotency-key': 'slow-1' })
    expect(retry.text).toBe(winner.text)
    expect(retry.headers.get('idempotent-replay')).toBe('true')
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

  it('runs one key from two scopes twice: the records are unrelated', async () => {
    const { client, resolvers } = await setup()
    const alice = await client.post(body, { 'idempotency-key': 'shared', 'x-user': 'alice' })
    const bob = await client.post(body, { 'idempotency-key': 'shared', 'x-user': 'bob' })
    expect(resolvers.createOrder).toHaveBeenCalledTimes(2)
    expect(bob.headers.get('idempotent-replay')).toBeNull()
    expect(bob.json.data.createOrder.id).not.toBe(alice.json.data.createOrder.id)
  })
})
