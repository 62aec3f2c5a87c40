import { initTRPC } from '@trpc/server'
import { fetchRequestHandler } from '@trpc/server/adapters/fetch'
import { createSchema, createYoga } from 'graphql-yoga'
import { vi } from 'vitest'
import { z } from 'zod'
import type { RetryEvent } from '../../adapters/client'
import { useIdempotency } from '../../adapters/envelop'
import { createIdempotencyMiddleware, getIdempotencyError } from '../../adapters/trpc'
import { createIdempotency, createMemoryStore } from '../../src'

/** A promise opened on cue: holds a handler mid-flight, or tells a test it has started. */
export function createGate() {
  let open!: () => void
  const opened = new Promise<void>((resolve) => {
    open = resolve
  })
  return { open, opened }
}

type Handle = (request: Request) => Promise<Response>

/** What one request looked like on the wire, and what the server answered. */
export interface Exchange {
  key: string | null
  body: string
  /** Undefined when the connection was cut before the answer. */
  status?: number
  replay?: string | null
  retryAfter?: string | null
}

/**
 * A `fetch` in front of a real server that can lose answers the way networks do:
 * `dropNext()` lets the server finish the next request, then loses its response (the client
 * sees a connection error); `cutNext()` loses the connection as soon as the request is sent,
 * while the server goes on running it (`pending` resolves when that run ends).
 */
export function lossyFetch(handle: Handle) {
  const exchanges: Exchange[] = []
  const pending: Promise<unknown>[] = []
  let drops = 0
  let cuts = 0
  const fetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const request = new Request(input, init)
    const exchange: Exchange = {
      key: request.headers.get('idempotency-key'),
      body: await request.clone().text(),
    }
    exchanges.push(exchange)
    const answered = handle(request).then(async (response) => {
      exchange.status = response.status
      exchange.replay = response.headers.get('idempotent-replay')
      exchange.retryAfter = response.headers.get('retry-after')
      // Read in full: the server is done with this request before anything is lost.
      const text = await response.text()
      return new Response(text, response)
    })
    if (cuts > 0) {
      cuts--
      pending.push(answered)
      throw new TypeError('fetch failed: connection reset')
    }
    const response = await answered
    if (drops > 0) {
      drops--
      throw new TypeError('fetch failed: socket hang up')
    }
    return response
  }
  return {
    fetch,
    exchanges,
    pending,
    dropNext: () => {
      drops++
    },
    cutNext: () => {
      cuts++
    },
  }
}

/** A tRPC router behind the fetch adapter, with the idempotency middleware and spied handlers. */
export function createTrpcServer() {
  const t = initTRPC.context<{ req: Request; resHeaders: Headers }>().create({
    // What the docs recommend: hand clients the SPEC code next to tRPC's own.
    errorFormatter: ({ shape, error }) => ({
      ...shape,
      data: { ...shape.data, idempotency: getIdempotencyError(error)?.code ?? null },
    }),
  })
  const idempotency = createIdempotency({ store: createMemoryStore() })
  const idempotent = t.procedure.use(createIdempotencyMiddleware({ idempotency }))
  const gate = createGate()
  const started = createGate()
  let nextId = 0
  const spies = {
    create: vi.fn((input: { item: string }) => ({ id: ++nextId, item: input.item })),
    list: vi.fn(() => ['a']),
    slow: vi.fn(async (input: { item: string }) => {
      started.open()
      await gate.opened
      return { id: ++nextId, item: input.item }
    }),
  }
  const order = z.object({ item: z.string() })
  const router = t.router({
    orders: t.router({
      create: idempotent.input(order).mutation(({ input }) => spies.create(input)),
      slow: idempotent.input(order).mutation(({ input }) => spies.slow(input)),
      list: idempotent.query(() => spies.list()),
    }),
  })
  const handle: Handle = (req) =>
    fetchRequestHandler({
      endpoint: '/trpc',
      req,
      router,
      createContext: ({ req, resHeaders }) => ({ req, resHeaders }),
    })
  return { router, handle, spies, gate, started: started.opened }
}

export type TrpcRouter = ReturnType<typeof createTrpcServer>['router']

/**
 * The GraphQL schema both server tests serve, with spied resolvers: `slowOrder` tells `started`
 * when it runs, and waits for `gate`.
 */
export function orderSchema() {
  const gate = createGate()
  const started = createGate()
  let nextId = 0
  const spies = {
    orders: vi.fn(() => [] as unknown[]),
    createOrder: vi.fn((_: unknown, args: { item: string }) => ({ id: ++nextId, item: args.item })),
    slowOrder: vi.fn(async (_: unknown, args: { item: string }) => {
      started.open()
      await gate.opened
      return { id: ++nextId, item: args.item }
    }),
  }
  const { orders, ...Mutation } = spies
  const typeDefs = /* GraphQL */ `
    type Order { id: Int!, item: String! }
    type Query { orders: [Order!]! }
    type Mutation {
      createOrder(item: String!): Order!
      slowOrder(item: String!): Order!
    }
  `
  const resolvers = { Query: { orders }, Mutation }
  const idempotency = createIdempotency({ store: createMemoryStore() })
  return { typeDefs, resolvers, idempotency, spies, gate, started: started.opened }
}

/**
 * A Yoga server with the idempotency plugin and spied resolvers. (Apollo Server's is in
 * ./apollo.ts: the graphql 17 leg of CI loads this file, and Apollo Server 5 runs on graphql 16
 * only.)
 */
export function createYogaServer() {
  const { typeDefs, resolvers, idempotency, ...server } = orderSchema()
  const yoga = createYoga({
    schema: createSchema({ typeDefs, resolvers }),
    logging: false,
    batching: true,
    plugins: [useIdempotency({ idempotency })],
  })
  const handle: Handle = async (request) => yoga.fetch(request)
  return { handle, ...server }
}

/**
 * Between attempts of the 409 story, waits on the story's events, never on time: after the
 * lost connection, until the first run's handler has started (it holds the key); after the
 * 409, lets that run finish and waits until its outcome is recorded.
 */
export function holdThenRelease(
  server: { started: Promise<void>; gate: { open(): void } },
  net: ReturnType<typeof lossyFetch>,
) {
  return async (retry: RetryEvent | undefined) => {
    if (retry?.kind === 'network') await server.started
    if (retry?.status === 409) {
      server.gate.open()
      await Promise.all(net.pending)
    }
  }
}
