import { createTRPCClient, httpBatchLink, httpLink, splitLink } from '@trpc/client'
import { describe, expect, it } from 'vitest'
import { idempotencyHeaders, idempotencyLink, type RetryEvent } from '../../adapters/client'
import { createTrpcServer, holdThenRelease, lossyFetch, type TrpcRouter } from './servers'

const url = 'http://in-process/trpc'

type Server = ReturnType<typeof createTrpcServer>

/** The client of the docs' recipe against the real tRPC fetch adapter. */
function connect(server: Server, between?: typeof holdThenRelease) {
  const net = lossyFetch(server.handle)
  const retries: RetryEvent[] = []
  const wait = between?.(server, net)
  const sleep = async () => wait?.(retries.at(-1))
  const client = createTRPCClient<TrpcRouter>({
    links: [
      idempotencyLink({ sleep, onRetry: (event) => retries.push(event) }),
      splitLink({
        condition: (op) => op.type === 'mutation',
        true: httpLink({ url, fetch: net.fetch, headers: idempotencyHeaders }),
        false: httpBatchLink({ url, fetch: net.fetch }),
      }),
    ],
  })
  return { client, net, retries }
}

describe('idempotencyLink against the tRPC server adapter (memory store)', () => {
  it('runs a mutation once when its response is lost, and hands the client the replay', async () => {
    const server = createTrpcServer()
    const { client, net } = connect(server)
    net.dropNext()
    const order = await client.orders.create.mutate({ item: 'book' })
    expect(server.spies.create).toHaveBeenCalledTimes(1)
    expect(order).toEqual(server.spies.create.mock.results[0]?.value)
    const [lost, retry] = net.exchanges
    expect(lost).toMatchObject({ status: 200, replay: null })
    expect(retry).toMatchObject({ status: 200, replay: 'true', key: lost?.key })
  })

  it('retries a 409 after its Retry-After and ends with the replay', async () => {
    const server = createTrpcServer()
    const { client, net, retries } = connect(server, holdThenRelease)
    net.cutNext()
    const order = await client.orders.slow.mutate({ item: 'lamp' })
    expect(server.spies.slow).toHaveBeenCalledTimes(1)
    expect(order).toEqual(await server.spies.slow.mock.results[0]?.value)
    expect(retries.map((r) => [r.kind, r.status, r.code, r.retryAfter])).toEqual([
      ['network', undefined, undefined, undefined],
      ['response', 409, 'IN_PROGRESS', 1000],
    ])
    expect(retries[1]?.delay).toBe(1000)
    const [, conflict, replay] = net.exchanges
    expect(conflict).toMatchObject({ status: 409, retryAfter: '1' })
    expect(replay).toMatchObject({ status: 200, replay: 'true' })
    expect(new Set(net.exchanges.map((e) => e.key)).size).toBe(1)
  })

  it('surfaces a 422 KEY_REUSED without retrying', async () => {
    const server = createTrpcServer()
    const { client, net, retries } = connect(server)
    const context = { idempotencyKey: 'order-1' }
    await client.orders.create.mutate({ item: 'book' }, { context })
    const error = await client.orders.create.mutate({ item: 'pen' }, { context }).catch((e) => e)
    expect(error.data).toMatchObject({ httpStatus: 422, idempotency: 'KEY_REUSED' })
    expect(net.exchanges).toHaveLength(2)
    expect(retries).toHaveLength(0)
    expect(server.spies.create).toHaveBeenCalledTimes(1)
  })

  it('never gives a query a key, and does not retry it', async () => {
    const server = createTrpcServer()
    const { client, net } = connect(server)
    net.dropNext()
    await expect(client.orders.list.query()).rejects.toThrow('socket hang up')
    expect(net.exchanges).toHaveLength(1)
    expect(net.exchanges[0]?.key).toBeNull()
  })

  it('with keyField, sends the key in the input through httpBatchLink and replays the same way', async () => {
    const server = createTrpcServer()
    const net = lossyFetch(server.handle)
    const client = createTRPCClient<TrpcRouter>({
      links: [
        idempotencyLink({ keyField: 'idempotencyKey', sleep: async () => {} }),
        httpBatchLink({ url, fetch: net.fetch }),
      ],
    })
    net.dropNext()
    const order = await client.orders.create.mutate({ item: 'book' })
    expect(server.spies.create).toHaveBeenCalledTimes(1)
    // The schema's z.object strips the field: the handler sees only its own input.
    expect(server.spies.create).toHaveBeenCalledWith({ item: 'book' })
    expect(order).toEqual(server.spies.create.mock.results[0]?.value)
    const [lost, retry] = net.exchanges
    expect(lost?.key).toBeNull()
    expect(JSON.parse(lost!.body)['0'].idempotencyKey).toMatch(/^[0-9a-f-]{36}$/)
    expect(retry).toMatchObject({ body: lost?.body, replay: 'true' })
  })

  it('gives two mutate() calls with the same input two keys, so both run', async () => {
    const server = createTrpcServer()
    const { client, net } = connect(server)
    const first = await client.orders.create.mutate({ item: 'book' })
    const second = await client.orders.create.mutate({ item: 'book' })
    expect(server.spies.create).toHaveBeenCalledTimes(2)
    expect(second.id).not.toBe(first.id)
    const [a, b] = net.exchanges.map((e) => e.key)
    expect(a).not.toBe(b)
    expect(net.exchanges.map((e) => e.replay)).toEqual([null, null])
  })
})
