/**
 * The server side of the load section (../sections/load.ts), in a process of its own so the
 * load generator's CPU is not the server's: a tRPC standalone server and a Yoga server on
 * node:http, each with the hand-written floor and the library on the same PostgreSQL pool (20
 * connections), and on Redis when REDIS_URL is set. It tells its parent where it listens, and
 * answers the parent's questions about its CPU time and the statements it sent, over IPC.
 *
 * Environment: BENCH_BUILD (the built library's folder), DATABASE_URL, REDIS_URL (optional).
 */
import { existsSync } from 'node:fs'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { initTRPC } from '@trpc/server'
import { createHTTPServer } from '@trpc/server/adapters/standalone'
import { createSchema, createYoga, type Plugin } from 'graphql-yoga'
import { createClient } from 'redis'
import type { Idempotency } from '../../src'
import { loadBuild, loadSources } from '../lib/build'
import { openDatabase } from '../lib/database'
import { type Counter, countCalls } from '../lib/peers'
import {
  createFloor,
  createFloorTables,
  insertOrder,
  type OrderInput,
  type Query,
} from '../sections/floor'
import { createRedisFloor } from './redis-floor'

export type ToServer = { type: 'stats' }
export type FromServer =
  | { type: 'ready'; trpc: string; yoga: string; yogaFloor: string; redis: boolean }
  | { type: 'stats'; cpuUs: number; statements: number; roundTrips: number; redisCommands: number }

const send = (message: FromServer) => process.send?.(message)

async function main(): Promise<void> {
  const build = process.env.BENCH_BUILD!
  // `--source` hands over the repository itself, which holds no build.
  const lib = existsSync(join(build, 'src', 'index.js'))
    ? await loadBuild(build)
    : await loadSources()
  const database = await openDatabase('postgres', process.env.DATABASE_URL)
  const { schema } = database
  let ownStatements = 0
  const query: Query = (text, params) => {
    ownStatements++
    return database.query(text, params)
  }
  await createFloorTables(query, schema)
  const store = lib.drizzle.createDrizzleStore(database.db, {
    table: lib.drizzle.defineIdempotencyTable('records_load', schema),
  })
  await store.ensureTable()
  // An engine per server: a replay cache shared with the other server's first executions would
  // hold fewer of the replayed keys.
  const engines = {
    ours: lib.core.createIdempotency({ store }),
    yoga: lib.core.createIdempotency({ store }),
    storeRead: lib.core.createIdempotency({ store, replayCache: false }),
  }
  const floor = createFloor(schema)
  const placeOrder = (input: OrderInput) => insertOrder(query, schema, input)
  const redis = process.env.REDIS_URL ? await connectRedis(process.env.REDIS_URL) : undefined
  const redisEngine =
    redis &&
    lib.core.createIdempotency({
      store: lib.redis.createRedisStore(redis.client, { prefix: `im-load:${process.pid}:ours:` }),
    })
  const redisFloor = redis && createRedisFloor(redis.client, `im-load:${process.pid}:floor:`)

  /**
   * The keyed mutation each server offers, by name: the floor, the floor on a table of the
   * SPEC's record, ours, ours on Redis.
   */
  const protect = (name: string, key: string, input: OrderInput, run: () => Promise<unknown>) => {
    if (name === 'floor') return floor(query, key, () => placeOrder(input))
    if (name === 'specFloor') return floor(query, key, () => placeOrder(input), true)
    if (name === 'redisFloor' && redisFloor) return redisFloor(key, () => placeOrder(input))
    return run()
  }

  const t = initTRPC.context<{ req: IncomingMessage; res: ServerResponse }>().create()
  const parse = (raw: unknown) => raw as OrderInput
  const keyOf = (req: IncomingMessage) => {
    const key = req.headers['idempotency-key']
    if (typeof key !== 'string') throw new Error('the floor needs a key')
    return key
  }
  const floorProcedure = (name: string) =>
    t.procedure
      .input(parse)
      .mutation(({ input, ctx }) => protect(name, keyOf(ctx.req), input, () => placeOrder(input)))
  const oursProcedure = <T>(idempotency: Idempotency<T>) =>
    t.procedure
      .use(lib.trpc.createIdempotencyMiddleware({ idempotency }))
      .input(parse)
      .mutation(({ input }) => placeOrder(input))
  const router = t.router({
    // A control for replays: an answer that waits on nothing.
    constant: t.procedure
      .input(parse)
      .mutation(({ input }) => ({ id: '1', item: input.item, quantity: input.quantity })),
    floor: floorProcedure('floor'),
    specFloor: floorProcedure('specFloor'),
    ours: oursProcedure(engines.ours),
    storeRead: oursProcedure(engines.storeRead),
    ...(redisEngine
      ? { redisOurs: oursProcedure(redisEngine), redisFloor: floorProcedure('redisFloor') }
      : {}),
  })
  const trpc = createHTTPServer({ router, createContext: ({ req, res }) => ({ req, res }) })

  // Two Yoga servers: the floor's without the plugin, which would also see the key.
  const yogaWith = (plugins: Plugin[]) =>
    createYoga({
      schema: createSchema({
        typeDefs: /* GraphQL */ `
        type Order { id: ID! item: String! quantity: Int! }
        type Query { ok: Boolean }
        type Mutation {
          createOrder(item: String!, quantity: Int!): Order!
          createOrderFloor(item: String!, quantity: Int!): Order!
        }`,
        resolvers: {
          Mutation: {
            createOrder: (_: unknown, input: OrderInput) => placeOrder(input),
            createOrderFloor: (_: unknown, input: OrderInput, context: { request: Request }) => {
              const key = context.request.headers.get('idempotency-key')
              if (key === null) throw new Error('the floor needs a key')
              return protect('floor', key, input, () => placeOrder(input))
            },
          },
        },
      }),
      logging: false,
      plugins,
    })
  const yogaServer = createServer(
    yogaWith([lib.envelop.useIdempotency({ idempotency: engines.yoga })]),
  )
  const yogaFloorServer = createServer(yogaWith([]))

  const listen = (server: ReturnType<typeof createServer>) =>
    new Promise<string>((resolve) =>
      server.listen(0, '127.0.0.1', () =>
        resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`),
      ),
    )
  const [trpcUrl, yogaUrl, yogaFloorUrl] = await Promise.all([
    listen(trpc),
    listen(yogaServer),
    listen(yogaFloorServer),
  ])

  process.on('message', (message: ToServer) => {
    if (message.type !== 'stats') return
    const cpu = process.cpuUsage()
    send({
      type: 'stats',
      cpuUs: cpu.user + cpu.system,
      statements: ownStatements + database.statements.count,
      roundTrips: database.roundTrips.count,
      redisCommands: redis?.commands.count ?? 0,
    })
  })
  // The parent going away (its end, or its crash) ends this process too.
  process.on('disconnect', async () => {
    trpc.closeAllConnections()
    yogaServer.closeAllConnections()
    yogaFloorServer.closeAllConnections()
    await database.close().catch(() => {})
    await redis?.client.quit().catch(() => {})
    process.exit(0)
  })
  send({
    type: 'ready',
    trpc: trpcUrl,
    yoga: `${yogaUrl}/graphql`,
    yogaFloor: `${yogaFloorUrl}/graphql`,
    redis: redis !== undefined,
  })
}

/** A node-redis client that counts the commands ours and the floor send (each one round trip). */
async function connectRedis(url: string) {
  const client = createClient({ url })
  client.on('error', () => {})
  await client.connect()
  const commands: Counter = { count: 0 }
  countCalls(client, ['evalSha', 'eval', 'set', 'get'], commands)
  return { client, commands }
}

main().catch((error: unknown) => {
  console.error(error)
  process.exit(1)
})
