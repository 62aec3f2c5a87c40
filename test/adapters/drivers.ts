import { vi } from 'vitest'
import { trpcCodeForIdempotencyError } from '../../adapters/trpc'
import {
  createMemoryStore,
  type IdempotencyErrorCode,
  type IdempotencyStore,
  idempotencyErrorStatus,
} from '../../src'
import { apolloTransports, createApolloFixture } from '../apollo/fixtures'
import {
  createFixture,
  createOrder,
  type GraphQLBody,
  type Client as GraphQLClient,
  transports,
  type Reply as YogaReply,
} from '../envelop/fixtures'
import { createHttpApp, gate, transports as httpTransports, json } from '../http/fixtures'
import { useHttpStores } from '../http/store-kinds'
import { createApp, serve, settle, type Transport as TRPCTransport } from '../trpc/fixtures'

/**
 * One adapter behind a real server, driven the same way whatever the host: the behaviour table
 * (./behaviour.test.ts) runs every row through each.
 *
 * The operations each host serves:
 * - `create`: the business mutation; the same `item` is the same payload.
 * - `other`: another operation that runs the same business handler (a second tRPC procedure,
 *   the GraphQL mutation with one more root field, PATCH instead of POST).
 * - `read`: what the host does not treat as a mutation (a tRPC query, a GraphQL query, GET).
 * - `slow`: a mutation held until `release()`.
 * - `reject`: a deterministic failure (a tRPC BAD_REQUEST, a GraphQLError thrown on purpose, a
 *   402); `crash`: an unexpected one (a plain throw, an unexpected error Yoga masks and Apollo
 *   reports as INTERNAL_SERVER_ERROR, a 503).
 */
export type Operation = 'create' | 'other' | 'read' | 'slow' | 'reject' | 'crash'

export interface Call {
  operation?: Operation
  key?: string
  /** The payload. @default 'pen' */
  item?: string
  /** The caller, the adapter's scope. */
  user?: string
}

/** What the client got, in the terms the table compares. */
export interface Reply {
  /** Whether the operation succeeded, as the host tells its client. */
  ok: boolean
  status: number
  /** The `Idempotent-Replay` header. */
  replay: string | null
  retryAfter: string | null
  /** The library's stable code, read from the host's idiom; null for anything else. */
  code: IdempotencyErrorCode | null
  /** How the host told the client the code (compared with `Driver.refusal`). */
  idiom: unknown
  /** The answer as the client read it: a replay must give the same. */
  body: string
}

export interface App {
  send(call?: Call): Promise<Reply>
  /** How many times the business handler behind `operation` ran (`other` runs `create`'s). */
  ran(operation: Operation): number
  /** How many claims reached the store. */
  claims(): number
  /** Lets the held `slow` handler finish. */
  release(): void
  close(): Promise<void>
}

export interface OpenOptions {
  /** The adapter's own `required` option. */
  required?: boolean
  store?: IdempotencyStore
}

export interface Driver {
  name: string
  open(options?: OpenOptions): Promise<App>
  /** The statuses of `create`, `reject` and `crash`, and the text `reject` fails with. */
  answers: { ok: number; rejected: number; crashed: number; rejection: string }
  /** How this host answers the library's `code`: the `idiom` a refusal must have. */
  refusal(code: IdempotencyErrorCode): unknown
}

const quiet = { logger: { warn() {}, error() {} } }

let calls = 0

export function trpcDriver(transport: TRPCTransport, superjson: boolean): Driver {
  return {
    name: `tRPC over ${transport}${superjson ? ' with superjson' : ''}`,
    answers: { ok: 200, rejected: 400, crashed: 500, rejection: 'no orders for pen' },
    refusal: (code) => ({
      code: trpcCodeForIdempotencyError[code],
      httpStatus: idempotencyErrorStatus[code],
    }),
    async open(options = {}) {
      const app = createApp({
        superjson,
        store: options.store ?? createMemoryStore(),
        engine: quiet,
        middleware: { required: options.required },
      })
      const claim = vi.spyOn(app.store, 'claim')
      const server = await serve(app, transport)
      const { order } = server.client
      const send = async ({ operation = 'create', key, item = 'pen', user }: Call = {}) => {
        const context = { context: { key, user, call: String(++calls) } }
        const input = { name: item }
        const calling = {
          create: () => order.create.mutate(input, context),
          other: () => order.archive.mutate(input, context),
          read: () => order.list.query(input, context),
          slow: () => order.slow.mutate(undefined, context),
          reject: () => order.reject.mutate(input, context),
          crash: () => order.crash.mutate(undefined, context),
        }[operation]
        const outcome = await settle<unknown>(calling())
        const seen = server.responses.find((response) => response.call === context.context.call)!
        return {
          ok: outcome.ok,
          status: seen.status,
          replay: seen.replay,
          retryAfter: seen.retryAfter,
          code: outcome.ok ? null : (outcome.data.idempotency as IdempotencyErrorCode | null),
          idiom: outcome.ok
            ? undefined
            : { code: outcome.data.code, httpStatus: outcome.data.httpStatus },
          body: JSON.stringify(outcome),
        }
      }
      const spies = {
        create: app.spies.create,
        other: app.spies.create,
        read: app.spies.list,
        slow: app.spies.slow,
        reject: app.spies.reject,
        crash: app.spies.crash,
      }
      return {
        send,
        ran: (operation) => spies[operation].mock.calls.length,
        claims: () => claim.mock.calls.length,
        release: () => app.slowRelease.resolve(),
        close: () => server.close(),
      }
    },
  }
}

const yogaDocuments: Record<Operation, (item: string) => GraphQLBody> = {
  create: (item) => ({ query: createOrder, variables: { item, quantity: 1 } }),
  other: (item) => ({
    query: 'mutation ($item: String!) { createOrder(item: $item) { id } sendEmail(to: $item) }',
    variables: { item },
  }),
  read: () => ({ query: '{ orders { id } }' }),
  slow: () => ({ query: 'mutation { slowOrder(item: "lamp") { id item } }' }),
  reject: () => ({ query: 'mutation {\n  rejectOrder(reason: "out of stock") { id }\n}' }),
  crash: () => ({ query: 'mutation { failUnexpectedly { id } }' }),
}

const yogaCode = (reply: YogaReply): IdempotencyErrorCode | null => {
  const code: unknown = reply.json?.errors?.[0]?.extensions?.code
  return typeof code === 'string' && code.startsWith('IDEMPOTENCY_')
    ? (code.slice('IDEMPOTENCY_'.length) as IdempotencyErrorCode)
    : null
}

/** A refusal as a GraphQL server answers it: no `data`, the code in `extensions`. */
const graphqlRefusal = (code: IdempotencyErrorCode) => ({
  data: undefined,
  extensions: {
    code: `IDEMPOTENCY_${code}`,
    ...(code === 'IN_PROGRESS' ? { retryAfter: 1 } : {}),
  },
})

/** The test schema's server (Yoga or Apollo) behind `client`, driven the table's way. */
function graphqlApp(client: GraphQLClient, fixture: GraphQLFixture): App {
  const { resolvers } = fixture
  const spies = {
    create: resolvers.createOrder,
    other: resolvers.createOrder,
    read: resolvers.orders,
    slow: resolvers.slowOrder,
    reject: resolvers.rejectOrder,
    crash: resolvers.failUnexpectedly,
  }
  return {
    async send({ operation = 'create', key, item = 'pen', user } = {}) {
      const headers: Record<string, string> = {}
      if (key !== undefined) headers['idempotency-key'] = key
      if (user !== undefined) headers['x-user'] = user
      const reply = await client.post(yogaDocuments[operation](item), headers)
      const code = yogaCode(reply)
      return {
        ok: reply.json?.errors === undefined && reply.json?.data != null,
        status: reply.status,
        replay: reply.headers.get('idempotent-replay'),
        retryAfter: reply.headers.get('retry-after'),
        code,
        idiom:
          code === null
            ? undefined
            : { data: reply.json.data, extensions: reply.json.errors[0].extensions },
        body: reply.text,
      }
    },
    ran: (operation) => spies[operation].mock.calls.length,
    claims: () => fixture.store.claim.mock.calls.length,
    release: () => fixture.gate.open(),
    close: () => client.close(),
  }
}

type GraphQLFixture = Pick<ReturnType<typeof createFixture>, 'resolvers' | 'store' | 'gate'>

/**
 * A GraphQL server over the test schema: GraphQL answers its errors in a 200 (with no
 * `extensions.http.status` to say otherwise), Yoga and Apollo alike.
 */
export function graphqlDriver<TFixture extends GraphQLFixture>(
  name: string,
  create: (options: {
    store: IdempotencyStore | undefined
    plugin: { required: boolean | undefined }
    engine: typeof quiet
  }) => TFixture,
  connect: (fixture: TFixture) => Promise<GraphQLClient>,
): Driver {
  return {
    name,
    answers: { ok: 200, rejected: 200, crashed: 200, rejection: 'Order rejected: out of stock' },
    refusal: graphqlRefusal,
    async open(options = {}) {
      const fixture = create({
        store: options.store,
        plugin: { required: options.required },
        engine: quiet,
      })
      return graphqlApp(await connect(fixture), fixture)
    },
  }
}

const httpRoutes: Record<Operation, { method: string; path: string }> = {
  create: { method: 'POST', path: '/payments' },
  other: { method: 'PATCH', path: '/payments' },
  read: { method: 'GET', path: '/payments' },
  slow: { method: 'POST', path: '/payments' },
  reject: { method: 'POST', path: '/reject' },
  crash: { method: 'POST', path: '/busy' },
}

export function httpDriver(
  transport: (typeof httpTransports)[number],
  store: ReturnType<typeof useHttpStores>[number],
): Driver {
  return {
    name: `plain HTTP through ${transport} on the ${store.name} store`,
    answers: { ok: 201, rejected: 402, crashed: 503, rejection: 'card declined' },
    refusal: (code) => ({
      contentType: 'application/problem+json',
      problem: { type: 'about:blank', status: idempotencyErrorStatus[code], code },
    }),
    async open(options = {}) {
      const app = await createHttpApp(transport, {
        store: options.store ?? (await store.createStore()),
        engine: quiet,
        adapter: { required: options.required },
      })
      const claim = vi.spyOn(app.store, 'claim')
      const held = gate()
      return {
        async send({ operation = 'create', key, item = 'pen', user } = {}) {
          if (operation === 'slow') app.hold.gate = held
          const { method, path } = httpRoutes[operation]
          const body = method === 'GET' ? {} : json({ amount: item })
          const response = await app.send(path, { method, key, tenant: user, ...body })
          const text = await response.text()
          const contentType = response.headers.get('content-type')
          const problem = contentType === 'application/problem+json' ? JSON.parse(text) : undefined
          return {
            ok: response.ok,
            status: response.status,
            replay: response.headers.get('idempotent-replay'),
            retryAfter: response.headers.get('retry-after'),
            code: problem?.code ?? null,
            idiom:
              problem === undefined
                ? undefined
                : {
                    contentType,
                    problem: { type: problem.type, status: problem.status, code: problem.code },
                  },
            body: text,
          }
        },
        ran: (operation) => {
          if (operation === 'create' || operation === 'other' || operation === 'slow') {
            return app.charges.length
          }
          const { method, path } = httpRoutes[operation]
          return app.routes.mock.calls.filter(
            ([request]) => request.method === method && new URL(request.url).pathname === path,
          ).length
        },
        claims: () => claim.mock.calls.length,
        release: () => held.open(),
        close: () => app.close(),
      }
    },
  }
}

/**
 * Every adapter the table runs on: tRPC over each server adapter the tRPC tests use, Yoga in
 * process and over node:http, Apollo Server through each of its integrations and through
 * `executeOperation`, and the plain-HTTP adapters on each store kind (their records hold
 * whole responses). Call at the top of a test file: the stores' clean-up is registered there.
 */
export function adapterDrivers(file: string): { driver: Driver; skip: boolean }[] {
  const trpc = (
    [
      ['fetch', false],
      ['fetch', true],
      ['standalone', false],
      ['standalone', true],
      ['express', false],
      ['fastify', false],
      ['fastify', true],
      ['next', false],
    ] as const
  ).map(([transport, superjson]) => ({ driver: trpcDriver(transport, superjson), skip: false }))
  const yoga = transports.map(([transport, connect]) => ({
    driver: graphqlDriver(`GraphQL Yoga through ${transport}`, createFixture, (fixture) =>
      connect(fixture.yoga),
    ),
    skip: false,
  }))
  const apollo = apolloTransports.map(([transport, connect]) => ({
    driver: graphqlDriver(`Apollo Server through ${transport}`, createApolloFixture, (fixture) =>
      connect(fixture.server),
    ),
    skip: false,
  }))
  const http = useHttpStores(file).flatMap((store) =>
    httpTransports.map((transport) => ({
      driver: httpDriver(transport, store),
      skip: store.skip,
    })),
  )
  return [...trpc, ...yoga, ...apollo, ...http]
}
