import { ApolloClient, gql, HttpLink, InMemoryCache } from '@apollo/client'
import { afterEach, describe, expect, it } from 'vitest'
import { idempotentFetch, type RetryEvent } from '../../adapters/client/fetch'
import { createApolloServer } from './apollo'
import { holdThenRelease, lossyFetch } from './servers'

const url = 'http://in-process/graphql'
const createOrder = gql`
  mutation Create($item: String!) {
    createOrder(item: $item) {
      id
      item
    }
  }
`

type Server = ReturnType<typeof createApolloServer>

/** A real Apollo Client (core, no React) whose HttpLink fetches through `idempotentFetch`. */
function connect(server: Server, between?: typeof holdThenRelease) {
  const net = lossyFetch(server.handle)
  const retries: RetryEvent[] = []
  const wait = between?.(server, net)
  const client = new ApolloClient({
    cache: new InMemoryCache(),
    link: new HttpLink({
      uri: url,
      fetch: idempotentFetch(net.fetch, {
        sleep: async () => wait?.(retries.at(-1)),
        onRetry: (event) => retries.push(event),
      }),
    }),
  })
  return { client, net, retries }
}

describe('Apollo Client with idempotentFetch against the Apollo Server plugin (memory store)', () => {
  let server: Server | undefined
  afterEach(async () => {
    await server?.stop()
    server = undefined
  })

  it('runs a mutation once when its response is lost, and hands the client the replay', async () => {
    server = createApolloServer()
    const { client, net } = connect(server)
    net.dropNext()
    const { data } = await client.mutate({ mutation: createOrder, variables: { item: 'book' } })
    expect(server.spies.createOrder).toHaveBeenCalledTimes(1)
    expect(data).toEqual({ createOrder: { __typename: 'Order', id: 1, item: 'book' } })
    const [lost, retry] = net.exchanges
    expect(lost).toMatchObject({ status: 200, replay: null })
    expect(lost?.key).toEqual(expect.any(String))
    expect(retry).toMatchObject({ status: 200, replay: 'true', key: lost?.key })
    expect(net.exchanges).toHaveLength(2)
  })

  it('retries a 409 after its Retry-After and ends with the replay', async () => {
    server = createApolloServer()
    const { client, net, retries } = connect(server, holdThenRelease)
    net.cutNext()
    const { data } = await client.mutate({
      mutation: gql`mutation { slowOrder(item: "lamp") { id item } }`,
    })
    expect(server.spies.slowOrder).toHaveBeenCalledTimes(1)
    expect(data).toEqual({ slowOrder: { __typename: 'Order', id: 1, item: 'lamp' } })
    expect(retries.map((r) => [r.kind, r.status, r.code, r.retryAfter])).toEqual([
      ['network', undefined, undefined, undefined],
      ['response', 409, 'IN_PROGRESS', 1000],
    ])
    const [, conflict, replay] = net.exchanges
    expect(conflict).toMatchObject({ status: 409, retryAfter: '1' })
    expect(replay).toMatchObject({ status: 200, replay: 'true' })
    expect(new Set(net.exchanges.map((e) => e.key)).size).toBe(1)
  })

  it('never gives a query a key, and does not retry it', async () => {
    server = createApolloServer()
    const { client, net } = connect(server)
    net.dropNext()
    await expect(client.query({ query: gql`{ orders { id } }` })).rejects.toThrow('socket hang up')
    expect(net.exchanges).toHaveLength(1)
    expect(net.exchanges[0]?.key).toBeNull()
    expect(server.spies.orders).toHaveBeenCalledTimes(1)
  })
})
