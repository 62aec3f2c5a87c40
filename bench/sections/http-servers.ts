/**
 * The servers of the HTTP section: a tRPC standalone server with every procedure the section
 * measures, and three Yoga servers (plain, with the plugin, with the plugin and the replay
 * cache off), on 127.0.0.1.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { initTRPC } from '@trpc/server'
import { createHTTPServer } from '@trpc/server/adapters/standalone'
import { sql } from 'drizzle-orm'
import { bigint, integer, pgSchema, text } from 'drizzle-orm/pg-core'
import { createSchema, createYoga } from 'graphql-yoga'
import type { Idempotency } from '../../src'
import type { Library } from '../lib/build'
import type { PgDatabase as Database } from '../lib/database'
import { insertOrder, type OrderInput, type OrderRow, type Query } from './floor'

/** What the servers run: the section's engines, the mutation and its floors. */
export interface HttpApp {
  engines: Record<'idempotency' | 'storeRead' | 'transactional', Idempotency<unknown>>
  placeOrder(input: OrderInput): Promise<OrderRow>
  floor(key: string, input: OrderInput, onSpecRecord?: boolean): Promise<OrderRow>
  floorInTransaction(key: string, input: OrderInput): Promise<OrderRow>
  /**
   * The transactional floor as transactional mode runs it: in a drizzle transaction, on the
   * SPEC's record, a SAVEPOINT sent with the claim before the insert.
   */
  floorAsTransactionalMode(key: string, input: OrderInput): Promise<OrderRow>
  /** `query`, its statements counted with the section's own. */
  counted(query: Query): Query
  insertThroughDrizzle(
    tx: Database['db'],
    input: OrderInput,
    options?: { prepared?: boolean },
  ): Promise<OrderRow>
}

/** Starts them; the URLs in the order tRPC, Yoga plain, Yoga with the plugin, Yoga cache off. */
export async function startHttpServers(lib: Library, schema: string, app: HttpApp) {
  const { placeOrder, floor, floorInTransaction, floorAsTransactionalMode, insertThroughDrizzle } =
    app
  const { idempotency, storeRead, transactional } = app.engines
  return Promise.all([startTrpc(), ...startYogas()])

  async function startTrpc() {
    const t = initTRPC.context<{ req: IncomingMessage; res: ServerResponse }>().create()
    const parse = (raw: unknown) => raw as OrderInput
    const middleware = lib.trpc.createIdempotencyMiddleware({ idempotency })
    const router = t.router({
      plain: t.procedure.input(parse).mutation(({ input }) => placeOrder(input)),
      idempotent: t.procedure
        .use(middleware)
        .input(parse)
        .mutation(({ input }) => placeOrder(input)),
      storeRead: t.procedure
        .use(lib.trpc.createIdempotencyMiddleware({ idempotency: storeRead }))
        .input(parse)
        .mutation(({ input }) => placeOrder(input)),
      transactional: t.procedure
        .use(
          lib.trpc.createIdempotencyMiddleware({ idempotency: transactional, transactional: true }),
        )
        .input(parse)
        .mutation(({ input, ctx }) =>
          insertOrder(app.counted(onConnectionOf(ctx.tx)), schema, input),
        ),
      transactionalDrizzle: t.procedure
        .use(
          lib.trpc.createIdempotencyMiddleware({ idempotency: transactional, transactional: true }),
        )
        .input(parse)
        .mutation(({ input, ctx }) => insertThroughDrizzle(ctx.tx as Database['db'], input)),
      transactionalUnprepared: t.procedure
        .use(
          lib.trpc.createIdempotencyMiddleware({ idempotency: transactional, transactional: true }),
        )
        .input(parse)
        .mutation(({ input, ctx }) =>
          insertThroughDrizzle(ctx.tx as Database['db'], input, { prepared: false }),
        ),
      transactionalFloor: t.procedure.input(parse).mutation(({ input, ctx }) => {
        const key = ctx.req.headers['idempotency-key']
        if (typeof key !== 'string') throw new Error('the floor needs a key')
        return floorInTransaction(key, input)
      }),
      transactionalModeFloor: t.procedure.input(parse).mutation(({ input, ctx }) => {
        const key = ctx.req.headers['idempotency-key']
        if (typeof key !== 'string') throw new Error('the floor needs a key')
        return floorAsTransactionalMode(key, input)
      }),
      floor: t.procedure.input(parse).mutation(({ input, ctx }) => {
        const key = ctx.req.headers['idempotency-key']
        if (typeof key !== 'string') throw new Error('the floor needs a key')
        return floor(key, input)
      }),
      specFloor: t.procedure.input(parse).mutation(({ input, ctx }) => {
        const key = ctx.req.headers['idempotency-key']
        if (typeof key !== 'string') throw new Error('the floor needs a key')
        return floor(key, input, true)
      }),
    })
    const server = createHTTPServer({ router, createContext: ({ req, res }) => ({ req, res }) })
    return listen(server)
  }

  function startYogas() {
    const typeDefs = /* GraphQL */ `
      type Order {
        id: ID!
        item: String!
        quantity: Int!
      }
      type Query {
        ok: Boolean
      }
      type Mutation {
        createOrder(item: String!, quantity: Int!): Order!
        createOrderFloor(item: String!, quantity: Int!): Order!
      }
    `
    const resolvers = {
      Mutation: {
        createOrder: (_: unknown, input: OrderInput) => placeOrder(input),
        createOrderFloor: (_: unknown, input: OrderInput, context: { request: Request }) => {
          const key = context.request.headers.get('idempotency-key')
          if (key === null) throw new Error('the floor needs a key')
          return floor(key, input)
        },
      },
    }
    const plain = createYoga({ schema: createSchema({ typeDefs, resolvers }), logging: false })
    const withPlugin = createYoga({
      schema: createSchema({ typeDefs, resolvers }),
      logging: false,
      plugins: [lib.envelop.useIdempotency({ idempotency })],
    })
    const withStoreRead = createYoga({
      schema: createSchema({ typeDefs, resolvers }),
      logging: false,
      plugins: [lib.envelop.useIdempotency({ idempotency: storeRead })],
    })
    return [
      listen(createServer(plain), '/graphql'),
      listen(createServer(withPlugin), '/graphql'),
      listen(createServer(withStoreRead), '/graphql'),
    ]
  }
}

async function listen(server: Server, path = '') {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}${path}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

/** The floors' business table, for drizzle's query builder. */
export function ordersTable(schema: string) {
  return pgSchema(schema).table('orders', {
    id: bigint('id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity(),
    item: text('item').notNull(),
    quantity: integer('quantity').notNull(),
  })
}

/**
 * The handler's insert through drizzle, on the transaction: drizzle sends a query unprepared
 * unless it is named with `.prepare(name)`, and postgres.js sends an unprepared query with
 * parameters in two round trips (it asks the server for the parameters' types first).
 */
export async function insertWithDrizzle(
  orders: ReturnType<typeof ordersTable>,
  tx: Database['db'],
  input: OrderInput,
  { prepared = true } = {},
): Promise<OrderRow> {
  const insert = tx
    .insert(orders)
    .values({ item: input.item, quantity: input.quantity })
    .returning({
      id: sql<string>`${orders.id}::text`,
      item: orders.item,
      quantity: orders.quantity,
    })
  const [row] = prepared ? await insert.prepare('bench_insert_order').execute() : await insert
  return row!
}

/**
 * The floor's own statements on the connection of a drizzle transaction (postgres.js or PGlite),
 * prepared: a handler that writes as the transactional floor does.
 */
export function onConnectionOf(tx: unknown): Query {
  const client = (tx as { session?: { client?: Record<string, unknown> } }).session?.client
  const unsafe = client?.unsafe as
    | ((text: string, params: unknown[], options: object) => Promise<unknown>)
    | undefined
  if (unsafe) {
    return async <Row>(text: string, params: unknown[]) =>
      (await unsafe(text, params, { prepare: true })) as Row[]
  }
  const query = client?.query as
    | ((text: string, params: unknown[]) => Promise<{ rows: unknown[] }>)
    | undefined
  if (query)
    return async <Row>(text: string, params: unknown[]) => (await query(text, params)).rows as Row[]
  throw new Error('bench: no connection behind the transaction')
}
