import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createTRPCClient, httpLink, TRPCClientError } from '@trpc/client'
import { initTRPC, TRPCError } from '@trpc/server'
import { createHTTPServer } from '@trpc/server/adapters/standalone'
import { GraphQLError } from 'graphql'
import { createSchema, createYoga, type YogaInitialContext } from 'graphql-yoga'
import { vi } from 'vitest'
import { z } from 'zod'
import { type IdempotencyContextFields, useIdempotency } from '../../adapters/envelop'
import { createIdempotencyMiddleware } from '../../adapters/trpc'
import type { Idempotency } from '../../src'
import type { AnyPgDatabase, Orders } from './tables'

/** What a client saw of one HTTP response. */
export interface Seen {
  status: number
  replay: string | null
  retryAfter: string | null
}

/** Closes a node:http server, dropping keep-alive connections. */
function closer(server: ReturnType<typeof createServer>) {
  return () =>
    new Promise<void>((resolve, reject) => {
      server.closeAllConnections()
      server.close((error) => (error ? reject(error) : resolve()))
    })
}

async function listen(server: ReturnType<typeof createServer>): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

/**
 * A tRPC router whose procedures write through `ctx.tx` (the transactional middleware's
 * transaction, typed as the database's), served by the standalone adapter, with a real client.
 * Each resolver is a spy; `crash` fails unexpectedly on its first call only.
 */
export async function serveTrpc<TTransaction extends AnyPgDatabase>(
  idempotency: Idempotency<TTransaction>,
  orders: Orders,
) {
  const t = initTRPC.context<{ req?: IncomingMessage; res?: ServerResponse }>().create()
  const procedure = t.procedure.use(
    createIdempotencyMiddleware({ idempotency, transactional: true }),
  )
  const order = z.object({ ref: z.string(), item: z.string() })
  const insert = async (tx: TTransaction, input: z.infer<typeof order>) => {
    const [row] = await tx.insert(orders).values(input).returning({ id: orders.id })
    return { id: row?.id ?? -1, item: input.item }
  }
  const spies = {
    create: vi.fn(insert),
    refuse: vi.fn(async (tx: TTransaction, input: z.infer<typeof order>) => {
      await insert(tx, input)
      throw new TRPCError({ code: 'BAD_REQUEST', message: `${input.item} is out of stock` })
    }),
    crash: vi.fn(async (tx: TTransaction, input: z.infer<typeof order>) => {
      const written = await insert(tx, input)
      if (spies.crash.mock.calls.length === 1) throw new Error('the warehouse API timed out')
      return written
    }),
  }
  const router = t.router({
    create: procedure.input(order).mutation(({ ctx, input }) => spies.create(ctx.tx, input)),
    refuse: procedure.input(order).mutation(({ ctx, input }) => spies.refuse(ctx.tx, input)),
    crash: procedure.input(order).mutation(({ ctx, input }) => spies.crash(ctx.tx, input)),
    paymentKey: procedure
      .input(z.object({ ref: z.string() }))
      .mutation(({ ctx }) => ({ payment: ctx.idempotency.deriveKey('payment') })),
    // Queries through a transactional procedure are untouched: no transaction, no record.
    inTransaction: procedure.query(({ ctx }) => ctx.tx !== undefined),
  })

  const server = createHTTPServer({ router, createContext: ({ req, res }) => ({ req, res }) })
  const url = await listen(server)
  const responses: Seen[] = []
  const client = createTRPCClient<typeof router>({
    links: [
      httpLink({
        url,
        headers: ({ op }) =>
          op.context.key === undefined ? {} : { 'idempotency-key': String(op.context.key) },
        fetch: async (input, init) => {
          const response = await fetch(input, init)
          responses.push({
            status: response.status,
            replay: response.headers.get('idempotent-replay'),
            retryAfter: response.headers.get('retry-after'),
          })
          return response
        },
      }),
    ],
  })
  return { client, spies, responses, close: closer(server) }
}

/** A client call's value, or the shape of its error. */
export async function settleCall<T>(call: Promise<T>) {
  try {
    return { ok: true as const, value: await call }
  } catch (error) {
    if (!(error instanceof TRPCClientError)) throw error
    const data = error.data as { code: string; httpStatus: number }
    return { ok: false as const, message: error.message, code: data.code, status: data.httpStatus }
  }
}

export const typeDefs = /* GraphQL */ `
  type Order {
    id: Int!
    item: String!
  }
  type Payment {
    key: String!
  }
  type Query {
    orderCount(ref: String!): Int!
  }
  type Mutation {
    createOrder(ref: String!, item: String!): Order!
    refuseOrder(ref: String!, item: String!): Order
    crashOrder(ref: String!, item: String!): Order
    payment: Payment!
  }
`

export type Context = IdempotencyContextFields<AnyPgDatabase>

/**
 * The resolvers both GraphQL servers run, writing through `context.tx`: `refuseOrder` writes
 * then throws an expected GraphQLError; `crashOrder` writes then throws an unexpected error,
 * which the server masks. Each mutation resolver is a spy.
 */
export function orderResolvers(orders: Orders) {
  const insert = async (context: Context, args: { ref: string; item: string }) => {
    const tx = context.tx
    if (!tx) throw new Error('no transaction in the context')
    const [row] = await tx.insert(orders).values(args).returning({ id: orders.id })
    return { id: row?.id ?? -1, item: args.item }
  }
  const mutations = {
    createOrder: vi.fn((_: unknown, args: { ref: string; item: string }, context: Context) =>
      insert(context, args),
    ),
    refuseOrder: vi.fn(
      async (_: unknown, args: { ref: string; item: string }, context: Context) => {
        await insert(context, args)
        throw new GraphQLError(`${args.item} is out of stock`, {
          extensions: { code: 'OUT_OF_STOCK' },
        })
      },
    ),
    crashOrder: vi.fn(async (_: unknown, args: { ref: string; item: string }, context: Context) => {
      await insert(context, args)
      throw new Error('warehouse password is hunter2')
    }),
    payment: vi.fn((_: unknown, __: unknown, context: Context) => ({
      key: context.idempotency?.deriveKey('payment'),
    })),
  }
  const query = {
    orderCount: async (_: unknown, args: { ref: string }, context: Context) => {
      if (context.tx !== undefined) throw new Error('a query got a transaction')
      return args.ref.length
    },
  }
  return { mutations, resolvers: { Query: query, Mutation: mutations } }
}

/** Posts GraphQL requests to `url` and reads what the client saw. */
export function graphqlPoster(url: string) {
  return async (
    query: string,
    variables: Record<string, unknown>,
    headers: Record<string, string> = {},
  ) => {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json', ...headers },
      body: JSON.stringify({ query, variables }),
    })
    return {
      status: response.status,
      replay: response.headers.get('idempotent-replay'),
      // biome-ignore lint/suspicious/noExplicitAny: replies are read field by field
      body: (await response.json()) as any,
    }
  }
}

/**
 * A Yoga server (on node:http) over {@link orderResolvers}, in transactional mode. (Apollo
 * Server's is in ./apollo-server.ts: the graphql 17 leg of CI loads this file, and Apollo
 * Server 5 runs on graphql 16 only.)
 */
export async function serveYoga(idempotency: Idempotency<AnyPgDatabase>, orders: Orders) {
  const { mutations, resolvers } = orderResolvers(orders)
  const yoga = createYoga({
    schema: createSchema<Context & YogaInitialContext>({ typeDefs, resolvers }),
    logging: false,
    plugins: [useIdempotency({ idempotency, transactional: true })],
  })
  const server = createServer(yoga)
  const url = await listen(server)
  return { post: graphqlPoster(`${url}/graphql`), resolvers: mutations, close: closer(server) }
}
