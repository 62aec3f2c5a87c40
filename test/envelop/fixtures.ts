import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import {
  GraphQLError,
  GraphQLInt,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLSchema,
  GraphQLString,
} from 'graphql'
import { createSchema, createYoga, type YogaServerOptions } from 'graphql-yoga'
import { vi } from 'vitest'
import {
  idempotentDirectiveTypeDefs,
  type UseIdempotencyOptions,
  useIdempotency,
} from '../../adapters/envelop'
import {
  createIdempotency,
  createMemoryStore,
  type IdempotencyEvent,
  type IdempotencyOptions,
  type IdempotencyStore,
} from '../../src'
import { type GraphQLHost, type HostOptions, maskedMessage } from '../adapters/graphql-cases'

export const typeDefs = /* GraphQL */ `
  type Order {
    id: ID!
    item: String!
    quantity: Int!
  }
  input PlaceOrderInput {
    item: String!
    quantity: Int!
    idempotencyKey: String
  }
  type Query {
    orders: [Order!]!
  }
  type Mutation {
    createOrder(item: String!, quantity: Int = 1, idempotencyKey: String): Order!
    placeOrder(input: PlaceOrderInput!): Order!
    chargeCard(amount: Int!): Int! @idempotent(required: true, ttl: 60)
    sendEmail(to: String!): Boolean! @idempotent(ttl: 30)
    failUnexpectedly: Order
    rejectOrder(reason: String!, status: Int): Order
    slowOrder(item: String!): Order!
  }
`

/** A promise the test opens when it chooses: how a resolver is held mid-flight. */
export function createGate() {
  let open!: () => void
  const opened = new Promise<void>((resolve) => {
    open = resolve
  })
  return { open, opened }
}

/** Every store method wrapped in a spy that still calls through. */
export function spyOnStore(store: IdempotencyStore) {
  return {
    // A spied memory store is still in this process: the engine copies nothing in front of it.
    inProcess: store.inProcess,
    claim: vi.fn(store.claim.bind(store)),
    complete: vi.fn(store.complete.bind(store)),
    release: vi.fn(store.release.bind(store)),
    get: vi.fn(store.get.bind(store)),
    sweep: vi.fn(store.sweep.bind(store)),
  } satisfies IdempotencyStore
}

/** A clock tests move by hand, shared by the engine and the memory store. */
export function createClock(start = Date.UTC(2030, 0, 1)) {
  let now = start
  return {
    now: () => now,
    advance: (ms: number) => {
      now += ms
    },
  }
}

/**
 * The SDL test schema with a spy on each business resolver. `slowOrder` waits for `gate`.
 */
export function createTestSchema() {
  const gate = createGate()
  let nextId = 0
  const order = (item: string, quantity = 1) => ({ id: String(++nextId), item, quantity })
  const resolvers = {
    orders: vi.fn(() => []),
    createOrder: vi.fn((_: unknown, args: { item: string; quantity: number }) =>
      order(args.item, args.quantity),
    ),
    placeOrder: vi.fn((_: unknown, args: { input: { item: string; quantity: number } }) =>
      order(args.input.item, args.input.quantity),
    ),
    chargeCard: vi.fn((_: unknown, args: { amount: number }) => args.amount),
    sendEmail: vi.fn(() => true),
    failUnexpectedly: vi.fn(() => {
      throw new Error('database password is hunter2')
    }),
    rejectOrder: vi.fn((_: unknown, args: { reason: string; status?: number }) => {
      throw new GraphQLError(`Order rejected: ${args.reason}`, {
        extensions: {
          code: 'ORDER_REJECTED',
          ...(args.status ? { http: { status: args.status } } : {}),
        },
      })
    }),
    slowOrder: vi.fn(async (_: unknown, args: { item: string }) => {
      await gate.opened
      return order(args.item)
    }),
  }
  const { orders, ...mutations } = resolvers
  const schema = createSchema({
    typeDefs: [idempotentDirectiveTypeDefs, typeDefs],
    resolvers: { Query: { orders }, Mutation: mutations },
  })
  return { schema, resolvers, gate }
}

/** An engine on a spied store (memory by default), its events recorded. */
export function createSpiedEngine(options: {
  store?: IdempotencyStore | undefined
  engine?: Omit<IdempotencyOptions, 'store'> | undefined
}) {
  const store = spyOnStore(options.store ?? createMemoryStore({ now: options.engine?.now }))
  const events: IdempotencyEvent[] = []
  const idempotency = createIdempotency({
    store,
    onEvent: (event) => events.push(event),
    ...options.engine,
  })
  return { store, events, idempotency }
}

/** A graphql-js (code-first) schema whose `pay` field carries `extensions.idempotency`. */
export function codeFirstSchema(idempotency: unknown) {
  const pay = vi.fn((_: unknown, args: { amount: number }) => args.amount)
  const schema = new GraphQLSchema({
    query: new GraphQLObjectType({ name: 'Query', fields: { ok: { type: GraphQLString } } }),
    mutation: new GraphQLObjectType({
      name: 'Mutation',
      fields: {
        pay: {
          type: GraphQLInt,
          args: { amount: { type: new GraphQLNonNull(GraphQLInt) } },
          extensions: { idempotency },
          resolve: pay,
        },
      },
    }),
  })
  return { schema, pay }
}

export interface FixtureOptions {
  plugin?: Omit<UseIdempotencyOptions, 'idempotency'>
  engine?: Omit<IdempotencyOptions, 'store'>
  yoga?: Partial<YogaServerOptions<Record<string, unknown>, Record<string, unknown>>>
  store?: IdempotencyStore
  /** Replace the SDL schema (code-first tests). */
  schema?: GraphQLSchema
  /** Other Yoga plugins, registered before and after the idempotency plugin. */
  pluginsBefore?: YogaPlugins
  pluginsAfter?: YogaPlugins
}

type YogaPlugins = NonNullable<
  YogaServerOptions<Record<string, unknown>, Record<string, unknown>>['plugins']
>

/**
 * A Yoga server over the test schema, with spies on each business resolver and on the store.
 * The scope is the `x-user` request header.
 */
export function createFixture(options: FixtureOptions = {}) {
  const { store, events, idempotency } = createSpiedEngine(options)
  const { schema: sdlSchema, resolvers, gate } = createTestSchema()
  const schema = options.schema ?? sdlSchema
  const yoga = createYoga<Record<string, unknown>>({
    schema,
    logging: false,
    plugins: [
      ...(options.pluginsBefore ?? []),
      useIdempotency({
        idempotency,
        scope: ({ request }) => (request as Request).headers.get('x-user') ?? undefined,
        ...options.plugin,
      }),
      ...(options.pluginsAfter ?? []),
    ],
    ...options.yoga,
  })
  return { yoga, store, idempotency, resolvers, events, gate }
}

export type GraphQLBody = {
  query: string
  variables?: Record<string, unknown>
  operationName?: string
  extensions?: Record<string, unknown>
}

export interface Reply {
  status: number
  headers: Headers
  text: string
  // biome-ignore lint/suspicious/noExplicitAny: test replies are read field by field
  json: any
}

export interface Client {
  post(body: GraphQLBody | GraphQLBody[], headers?: Record<string, string>): Promise<Reply>
  close(): Promise<void>
}

type Yoga = ReturnType<typeof createFixture>['yoga']

async function toReply(response: Response): Promise<Reply> {
  const text = await response.text()
  const json = response.headers.get('content-type')?.includes('json') ? JSON.parse(text) : undefined
  return { status: response.status, headers: response.headers, text, json }
}

const request = (body: GraphQLBody | GraphQLBody[], headers: Record<string, string> = {}) => ({
  method: 'POST',
  headers: { 'content-type': 'application/json', accept: 'application/json', ...headers },
  body: JSON.stringify(body),
})

/** Talks to Yoga in process, through `yoga.fetch`. */
export async function fetchClient(yoga: Yoga): Promise<Client> {
  return {
    post: async (body, headers) =>
      toReply(await yoga.fetch('http://yoga.test/graphql', request(body, headers))),
    close: async () => {},
  }
}

/** Talks to Yoga through a real `node:http` server on a free port. */
export async function httpClient(yoga: Yoga): Promise<Client> {
  const server = createServer(yoga)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    post: async (body, headers) =>
      toReply(await fetch(`http://127.0.0.1:${port}/graphql`, request(body, headers))),
    close: async () => {
      server.closeAllConnections()
      await new Promise<void>((resolve, reject) =>
        server.close((error) => (error ? reject(error) : resolve())),
      )
    },
  }
}

export const transports = [
  ['yoga.fetch', fetchClient],
  ['node:http', httpClient],
] as const

export const createOrder = /* GraphQL */ `
  mutation CreateOrder($item: String!, $quantity: Int) {
    createOrder(item: $item, quantity: $quantity) {
      id
      item
      quantity
    }
  }
`

/** GraphQL Yoga (through `yoga.fetch`) as a host of the GraphQL cases both servers share. */
export const yogaHost = {
  name: 'GraphQL Yoga',
  incrementalAccept: { accept: 'multipart/mixed' },
  async setup({ plugin, engine, schema, batching, masking }: HostOptions = {}) {
    const maskedErrors =
      masking === undefined
        ? undefined
        : masking === 'off'
          ? false
          : { errorMessage: maskedMessage }
    const fixture = createFixture({ plugin, engine, schema, yoga: { batching, maskedErrors } })
    return { ...fixture, client: await fetchClient(fixture.yoga) }
  },
} satisfies GraphQLHost
