import { ApolloServer, type ApolloServerPlugin, type BaseContext } from '@apollo/server'
import { describe, expectTypeOf, it } from 'vitest'
import {
  type IdempotencyContextFields,
  type IdempotencyPluginOptions,
  idempotencyPlugin,
} from '../../adapters/apollo'
import { createIdempotency, createMemoryStore, type HandlerContext } from '../../src'

// These assertions are checked by `tsc --noEmit` (the tests also run them, as no-ops).
interface Context extends BaseContext {
  user?: { id: string }
}
const idempotency = createIdempotency({ store: createMemoryStore() })
const typeDefs = 'type Query { ok: Boolean } type Mutation { pay: Int }'

describe('idempotencyPlugin types', () => {
  it("types `scope` from the server's context, and fits an ApolloServer of that context", () => {
    const plugin = idempotencyPlugin<Context>({
      idempotency,
      scope: (context) => {
        expectTypeOf(context).toEqualTypeOf<Context>()
        return context.user?.id
      },
    })
    expectTypeOf(plugin).toEqualTypeOf<ApolloServerPlugin<Context>>()
    new ApolloServer<Context>({ typeDefs, plugins: [plugin] })
  })

  it('fits an ApolloServer whose context it was not told, with a loosely typed context', () => {
    new ApolloServer({
      typeDefs,
      plugins: [idempotencyPlugin({ idempotency, scope: (context) => context.user?.id })],
    })
    new ApolloServer<Context>({ typeDefs, plugins: [idempotencyPlugin({ idempotency })] })
  })

  it('types the fields it adds to the context (IdempotencyContextFields)', () => {
    type Resolved = Context & IdempotencyContextFields<{ execute(sql: string): unknown }>
    expectTypeOf<Resolved['tx']>().toEqualTypeOf<{ execute(sql: string): unknown } | undefined>()
    expectTypeOf<NonNullable<Resolved['idempotency']>>().toMatchTypeOf<HandlerContext<unknown>>()
    expectTypeOf<IdempotencyPluginOptions<Context>['mode']>().toEqualTypeOf<
      'all' | 'marked' | undefined
    >()
  })
})
