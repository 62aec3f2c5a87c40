import { ApolloServer } from '@apollo/server'
import { idempotencyPlugin } from '../../adapters/apollo'
import { type Context, fetchHandler } from '../apollo/fixtures'
import { orderSchema } from './servers'

/** An Apollo Server with the idempotency plugin and spied resolvers, behind a Fetch handler. */
export function createApolloServer() {
  const { typeDefs, resolvers, idempotency, ...server } = orderSchema()
  const apollo = new ApolloServer<Context>({
    typeDefs,
    resolvers,
    allowBatchedHttpRequests: true,
    plugins: [idempotencyPlugin({ idempotency })],
  })
  return { handle: fetchHandler(apollo), stop: () => apollo.stop(), ...server }
}
