// A GraphQL Yoga server with a retry-safe `charge` mutation (`npm run example:yoga`): the same
// mutation POSTed twice with one `Idempotency-Key` header makes one row; the second is a replay.
import { createServer } from 'node:http'
import { createSchema, createYoga } from 'graphql-yoga'
import { createIdempotency, type Idempotency } from 'idempotent-mutations'
import { createDrizzleStore } from 'idempotent-mutations/drizzle'
import { idempotentDirectiveTypeDefs, useIdempotency } from 'idempotent-mutations/envelop'
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
// Who is asking: in a real app, the authenticated user or tenant. Keys never cross users.
const scope = ({ request }: { request: Request }) => request.headers.get('x-user-id') ?? 'anonymous'
type Observe = payments.Observe

export function createYogaServer(db: payments.Database, idem: Idempotency, observe?: Observe) {
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
        const row = { via: 'graphql', ...args }
        return (await db.insert(payments.charges).values(row).returning())[0]
      },
    },
  }
  const yoga = createYoga({
    schema: createSchema({ typeDefs: [idempotentDirectiveTypeDefs, typeDefs], resolvers }),
    plugins: [useIdempotency({ idempotency: idem, scope })],
    cors: { exposedHeaders: ['Idempotent-Replay', 'Retry-After'] },
  })
  return createServer(yoga)
}

if (payments.isMain(import.meta.url)) {
  const { db } = await payments.openPaymentsDatabase()
  const store = createDrizzleStore(db) // records live next to `charges`, in the same database
  await store.ensureTable()
  const idempotency = createIdempotency({ store, ttl: '24h' })
  const url = await payments.listen(createYogaServer(db, idempotency), 4000)
  console.log(`GraphQL Yoga server listening on ${url}/graphql`)
}
