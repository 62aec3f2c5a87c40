import { ApolloServer } from '@apollo/server'
import { startStandaloneServer } from '@apollo/server/standalone'
import { idempotencyPlugin } from '../../adapters/apollo'
import type { Idempotency } from '../../src'
import { maskUnexpectedErrors } from '../apollo/fixtures'
import { type Context, graphqlPoster, orderResolvers, typeDefs } from './servers'
import type { AnyPgDatabase, Orders } from './tables'

/**
 * An Apollo Server (`startStandaloneServer`) over {@link orderResolvers}, in transactional
 * mode, masking unexpected errors as Yoga does (`formatError`, as Apollo's docs show).
 */
export async function serveApollo(idempotency: Idempotency<AnyPgDatabase>, orders: Orders) {
  const { mutations, resolvers } = orderResolvers(orders)
  const server = new ApolloServer<Context>({
    typeDefs,
    resolvers,
    formatError: maskUnexpectedErrors('Unexpected error.'),
    plugins: [idempotencyPlugin<Context>({ idempotency, transactional: true })],
  })
  const { url } = await startStandaloneServer(server, { listen: { port: 0, host: '127.0.0.1' } })
  return { post: graphqlPoster(url), resolvers: mutations, close: () => server.stop() }
}
