import { describe, expect, it } from 'vitest'
import { idempotentFetch, type RetryEvent } from '../../adapters/client'
import { createYogaServer, holdThenRelease, lossyFetch } from './servers'

const url = 'http://in-process/graphql'
const createOrder = 'mutation Create($item: String!) { createOrder(item: $item) { id item } }'

type Server = ReturnType<typeof createYogaServer>

/** A plain GraphQL client over the wrapped fetch, against the real Yoga server. */
function connect(server: Server, between?: typeof holdThenRelease) {
  const net = lossyFetch(server.handle)
  const retries: RetryEvent[] = []
  const wait = between?.(server, net)
  const fetch = idempotentFetch(net.fetch, {
    sleep: async () => wait?.(retries.at(-1)),
    onRetry: (event) => retries.push(event),
  })
  const post = async (body: unknown, headers: Record<string, string> = {}) => {
    const response = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/graphql-response+json',
        ...headers,
      },
      body: JSON.stringify(body),
    })
    return { status: response.status, json: await response.json() }
  }
  return { post, net, retries }
}

describe('idempotentFetch against the Yoga server plugin (memory store)', () => {
  it('runs a mutation once when its response is lost, and hands the client the replay', async () => {
    const server = createYogaServer()
    const { post, net } = connect(server)
    net.dropNext()
    const reply = await post({ query: createOrder, variables: { item: 'book' } })
    expect(server.spies.createOrder).toHaveBeenCalledTimes(1)
    expect(reply).toEqual({ status: 200, json: { data: { createOrder: { id: 1, item: 'book' } } } })
    const [lost, retry] = net.exchanges
    expect(lost).toMatchObject({ status: 200, replay: null })
    expect(retry).toMatchObject({ status: 200, replay: 'true', key: lost?.key })
  })

  it('retries a 409 after its Retry-After and ends with the replay', async () => {
    const server = createYogaServer()
    const { post, net, retries } = connect(server, holdThenRelease)
    net.cutNext()
    const reply = await post({ query: 'mutation { slowOrder(item: "lamp") { id item } }' })
    expect(server.spies.slowOrder).toHaveBeenCalledTimes(1)
    expect(reply.json).toEqual({ data: { slowOrder: { id: 1, item: 'lamp' } } })
    expect(retries.map((r) => [r.kind, r.status, r.code, r.retryAfter, r.delay])).toEqual([
      ['network', undefined, undefined, undefined, expect.any(Number)],
      ['response', 409, 'IN_PROGRESS', 1000, 1000],
    ])
    const [, conflict, replay] = net.exchanges
    expect(conflict).toMatchObject({ status: 409, retryAfter: '1' })
    expect(replay).toMatchObject({ status: 200, replay: 'true' })
    expect(new Set(net.exchanges.map((e) => e.key)).size).toBe(1)
  })

  it('surfaces a 422 KEY_REUSED without retrying', async () => {
    const server = createYogaServer()
    const { post, net, retries } = connect(server)
    const key = { 'Idempotency-Key': 'order-1' }
    await post({ query: createOrder, variables: { item: 'book' } }, key)
    const reply = await post({ query: createOrder, variables: { item: 'pen' } }, key)
    expect(reply.status).toBe(422)
    expect(reply.json.errors[0].extensions.code).toBe('IDEMPOTENCY_KEY_REUSED')
    expect(net.exchanges.map((e) => e.key)).toEqual(['order-1', 'order-1'])
    expect(retries).toHaveLength(0)
    expect(server.spies.createOrder).toHaveBeenCalledTimes(1)
  })

  it('never gives a query a key, and does not retry it', async () => {
    const server = createYogaServer()
    const { post, net } = connect(server)
    net.dropNext()
    await expect(post({ query: '{ orders { id } }' })).rejects.toThrow('socket hang up')
    expect(net.exchanges).toHaveLength(1)
    expect(net.exchanges[0]?.key).toBeNull()
    expect(server.spies.orders).toHaveBeenCalledTimes(1)
  })

  it('gives two calls with the same body two keys, so both run', async () => {
    const server = createYogaServer()
    const { post, net } = connect(server)
    const body = { query: createOrder, variables: { item: 'book' } }
    const first = await post(body)
    const second = await post(body)
    expect(server.spies.createOrder).toHaveBeenCalledTimes(2)
    expect(second.json.data.createOrder.id).not.toBe(first.json.data.createOrder.id)
    const [a, b] = net.exchanges.map((e) => e.key)
    expect(a).not.toBe(b)
  })

  it('replays every mutation of a lost batched request once, with its own key', async () => {
    const server = createYogaServer()
    const { post, net } = connect(server)
    net.dropNext()
    const batch = [
      { query: createOrder, variables: { item: 'book' } },
      { query: '{ orders { id } }' },
      { query: createOrder, variables: { item: 'pen' } },
    ]
    const reply = await post(batch)
    expect(server.spies.createOrder).toHaveBeenCalledTimes(2)
    expect(reply.json).toEqual([
      { data: { createOrder: { id: 1, item: 'book' } } },
      { data: { orders: [] } },
      { data: { createOrder: { id: 2, item: 'pen' } } },
    ])
    const [first, second] = net.exchanges.map((e) => JSON.parse(e.body))
    expect(second).toEqual(first)
    expect(first[0].extensions.idempotencyKey).not.toBe(first[2].extensions.idempotencyKey)
  })
})
