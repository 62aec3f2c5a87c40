// An Apollo Server with a retry-safe `charge` mutation (`npm run example:apollo`): the same
// mutation POSTed twice with one `Idempotency-Key` header makes one row; the second is a replay.
import { ApolloServer } from '@apollo/server'
import { startStandaloneServer } from '@apollo/server/standalone'
import { createIdempotency, type Idempotency } from 'idempotent-mutations'
import { idempotencyPlugin, idempotentDirectiveTypeDefs } from 'idempotent-mutations/apollo'
import { createDrizzleStore } from 'idempotent-mutations/drizzle'
import * as payments from './payments'

const typeDefs = /* GraphQL */ `
  type Charge { id: Int!, orderId: String!, amount: Int!, currency: String!, via: String! }
  type Query { charges: [Charge!]! }
  type Mutation {
    charge(orderId: String!, amount: Int!, currency: String!): Charge!
      @idempotent(required: true, ttl: 86400)
  }
`
type ChargeArgs = { orderId: string; amount: number; currency: string }
/** Who is asking: in a real app, the authenticated user or tenant. Keys never cross users. */
type Context = { userId: string }

/** Starts Apollo Server's standalone HTTP server on `port` (0: a free one). */
export async function startApolloServer(
  db: payments.Database,
  idempotency: Idempotency,
  port: number,
  observe?: payments.Observe,
) {
  const resolvers = {
    Query: {
      async charges() {
        await observe?.('query')
        return db.select().from(payments.charges)
      },
    },
    Mutation: {
      async charge(_: unknown, args: ChargeArgs) {
        await observe?.('charge')
        const row = { via: 'apollo', ...args }
        return (await db.insert(payments.charges).values(row).returning())[0]
      },
    },
  }
  const server = new ApolloServer<Context>({
    typeDefs: [idempotentDirectiveTypeDefs, typeDefs],
    resolvers,
    plugins: [idempotencyPlugin<Context>({ idempotency, scope: (context) => context.userId })],
  })
  const { url } = await startStandaloneServer(server, {
    listen: { port, host: '127.0.0.1' },
    context: async ({ req }) => ({ userId: String(req.headers['x-user-id'] ?? 'anonymous') }),
  })
  return { url: url.replace(/\/$/, ''), stop: () => server.stop() }
}

if (payments.isMain(import.meta.url)) {
  const { db } = await payments.openPaymentsDatabase()
  const store = createDrizzleStore(db) // records live next to `charges`, in the same database
  await store.ensureTable()
  const idempotency = createIdempotency({ store, ttl: '24h' })
  const { url } = await startApolloServer(db, idempotency, Number(process.env.PORT ?? 4001))
  console.log(`Apollo Server listening on ${url}`)
}
