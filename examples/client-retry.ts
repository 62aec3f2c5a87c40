/**
 * The client half, end to end: a tRPC client and a GraphQL client whose network loses the first
 * response after the server has run the mutation. Each client retries with the same
 * Idempotency-Key, the server replays, and the mutation runs once.
 *
 *     npx tsx examples/client-retry.ts
 */
import { createTRPCClient, httpBatchLink, httpLink, splitLink } from '@trpc/client'
import { initTRPC } from '@trpc/server'
import { fetchRequestHandler } from '@trpc/server/adapters/fetch'
import { createSchema, createYoga } from 'graphql-yoga'
import { createIdempotency, createMemoryStore } from 'idempotent-mutations'
import { idempotencyHeaders, idempotencyLink, idempotentFetch } from 'idempotent-mutations/client'
import { useIdempotency } from 'idempotent-mutations/envelop'
import { createIdempotencyMiddleware } from 'idempotent-mutations/trpc'
import { z } from 'zod'

let charges = 0
const idempotency = createIdempotency({ store: createMemoryStore() })

// --- servers -------------------------------------------------------------------------------
const t = initTRPC.context<{ req: Request; resHeaders: Headers }>().create()
const router = t.router({
  charge: t.procedure
    .use(createIdempotencyMiddleware({ idempotency }))
    .input(z.object({ amount: z.number() }))
    .mutation(({ input }) => ({ charge: ++charges, amount: input.amount })),
})
const trpcServer = (req: Request) =>
  fetchRequestHandler({
    endpoint: '/trpc',
    req,
    router,
    createContext: ({ req, resHeaders }) => ({ req, resHeaders }),
  })

const yoga = createYoga({
  logging: false,
  plugins: [useIdempotency({ idempotency })],
  schema: createSchema({
    typeDefs: 'type Query { ok: Boolean } type Mutation { charge(amount: Int!): Int! }',
    resolvers: { Mutation: { charge: () => ++charges } },
  }),
})

/** A network that lets the server finish the first request, then loses its response. */
function flakyNetwork(server: (request: Request) => Promise<Response>): typeof fetch {
  let lost = false
  return async (input, init) => {
    const response = await server(new Request(input, init))
    if (!lost) {
      lost = true
      await response.text()
      throw new TypeError('fetch failed: the response was lost')
    }
    console.log(
      `  retry answered ${response.status}, Idempotent-Replay: ${response.headers.get('idempotent-replay')}`,
    )
    return response
  }
}

const onRetry = ({ attempt, kind, key }: { attempt: number; kind: string; key: string }) =>
  console.log(`  attempt ${attempt} failed (${kind}); retrying with Idempotency-Key ${key}`)

// --- tRPC: mutations one per request with their key, queries batched -------------------------
const trpcFetch = flakyNetwork(trpcServer)
const trpc = createTRPCClient<typeof router>({
  links: [
    idempotencyLink({ onRetry }),
    splitLink({
      condition: (op) => op.type === 'mutation',
      true: httpLink({ url: 'http://local/trpc', fetch: trpcFetch, headers: idempotencyHeaders }),
      false: httpBatchLink({ url: 'http://local/trpc', fetch: trpcFetch }),
    }),
  ],
})
console.log('tRPC:')
console.log('  result', await trpc.charge.mutate({ amount: 42 }), `(charges run: ${charges})`)

// --- GraphQL: any client that takes a fetch (urql, Apollo, graphql-request) ----------------
const graphqlFetch = idempotentFetch(
  flakyNetwork(async (request) => yoga.fetch(request)),
  { onRetry },
)
console.log('GraphQL:')
const response = await graphqlFetch('http://local/graphql', {
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ query: 'mutation { charge(amount: 42) }' }),
})
console.log('  result', await response.json(), `(charges run: ${charges})`)

// Each transport sent its mutation twice (the first answer was lost): one charge each.
if (charges !== 2) {
  console.error(`expected 2 charges (one per transport), got ${charges}`)
  process.exitCode = 1
}
