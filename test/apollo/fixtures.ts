import { createServer, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import {
  ApolloServer,
  type ApolloServerOptions,
  type ApolloServerPlugin,
  type BaseContext,
  HeaderMap,
} from '@apollo/server'
import { unwrapResolverError } from '@apollo/server/errors'
import { startStandaloneServer } from '@apollo/server/standalone'
import { expressMiddleware } from '@as-integrations/express5'
import express from 'express'
import { GraphQLError, type GraphQLSchema } from 'graphql'
import { type IdempotencyPluginOptions, idempotencyPlugin } from '../../adapters/apollo'
import type { IdempotencyOptions, IdempotencyStore } from '../../src'
import { type GraphQLHost, type HostOptions, maskedMessage } from '../adapters/graphql-cases'
import {
  type Client,
  createSpiedEngine,
  createTestSchema,
  type GraphQLBody,
  type Reply,
} from '../envelop/fixtures'

/** The context every integration builds: the caller from the `x-user` header. */
export interface Context extends BaseContext {
  user?: string | undefined
}

export interface ApolloFixtureOptions {
  plugin?: Omit<IdempotencyPluginOptions<Context>, 'idempotency'>
  engine?: Omit<IdempotencyOptions, 'store'>
  /** Apollo Server's own options (`formatError`, `allowBatchedHttpRequests`, ...). */
  apollo?: Partial<ApolloServerOptions<Context>>
  store?: IdempotencyStore
  /** Replace the SDL schema of the Yoga tests (the same schema by default). */
  schema?: GraphQLSchema
  pluginsBefore?: ApolloServerPlugin<Context>[]
}

/**
 * An Apollo Server over the Yoga tests' SDL schema (the same resolvers, each a spy), with the
 * idempotency plugin and a spied store. The scope is the caller (`context.user`).
 */
export function createApolloFixture(options: ApolloFixtureOptions = {}) {
  const { store, events, idempotency } = createSpiedEngine(options)
  const { schema: sdlSchema, resolvers, gate } = createTestSchema()
  const server = new ApolloServer<Context>({
    schema: options.schema ?? sdlSchema,
    ...options.apollo,
    plugins: [
      ...(options.pluginsBefore ?? []),
      idempotencyPlugin<Context>({
        idempotency,
        scope: (context) => context.user,
        ...options.plugin,
      }),
      ...(options.apollo?.plugins ?? []),
    ],
  } as ApolloServerOptions<Context>)
  return { server, store, idempotency, resolvers, events, gate }
}

type Server = ApolloServer<Context>

/**
 * The masking Apollo's docs recommend: only errors thrown on purpose (a GraphQLError from a
 * resolver) reach the client; anything else gets `message`.
 */
export function maskUnexpectedErrors(
  message: string,
): ApolloServerOptions<BaseContext>['formatError'] {
  return (formatted, error) =>
    unwrapResolverError(error) instanceof GraphQLError
      ? formatted
      : { message, extensions: { code: 'INTERNAL_SERVER_ERROR' } }
}

const userOf = (headers: IncomingMessage['headers'] | Headers): string | undefined => {
  const user = headers instanceof Headers ? headers.get('x-user') : headers['x-user']
  return typeof user === 'string' ? user : undefined
}

async function toReply(response: Response): Promise<Reply> {
  const text = await response.text()
  const json = response.headers.get('content-type')?.includes('json') ? JSON.parse(text) : undefined
  return { status: response.status, headers: response.headers, text, json }
}

const post = async (
  url: string,
  body: GraphQLBody | GraphQLBody[],
  headers: Record<string, string> = {},
) =>
  toReply(
    await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json', ...headers },
      body: JSON.stringify(body),
    }),
  )

/** Through `startStandaloneServer`, on a free port. */
export async function standaloneClient(server: Server): Promise<Client> {
  const { url } = await startStandaloneServer(server, {
    listen: { port: 0, host: '127.0.0.1' },
    context: async ({ req }) => ({ user: userOf(req.headers) }),
  })
  return { post: (body, headers) => post(url, body, headers), close: () => server.stop() }
}

/** Through `expressMiddleware` (`@as-integrations/express5`), in an Express 5 app on node:http. */
export async function expressClient(server: Server): Promise<Client> {
  await server.start()
  const app = express()
  app.use(
    '/graphql',
    express.json(),
    expressMiddleware(server, { context: async ({ req }) => ({ user: userOf(req.headers) }) }),
  )
  const http = createServer(app)
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  const { port } = http.address() as AddressInfo
  return {
    post: (body, headers) => post(`http://127.0.0.1:${port}/graphql`, body, headers),
    close: async () => {
      http.closeAllConnections()
      await new Promise<void>((resolve, reject) =>
        http.close((error) => (error ? reject(error) : resolve())),
      )
      await server.stop()
    },
  }
}

/**
 * A Fetch handler, `(request: Request) => Promise<Response>`: what a Fetch-style integration
 * does (`@as-integrations/next` on the App Router), from `executeHTTPGraphQLRequest`.
 */
export function fetchHandler(server: Server) {
  server.startInBackgroundHandlingStartupErrorsByLoggingAndFailingAllRequests()
  return async (request: Request): Promise<Response> => {
    const headers = new HeaderMap()
    for (const [name, value] of request.headers) headers.set(name, value)
    const text = await request.text()
    const answer = await server.executeHTTPGraphQLRequest({
      httpGraphQLRequest: {
        method: request.method,
        headers,
        search: new URL(request.url).search,
        body: text === '' ? undefined : JSON.parse(text),
      },
      context: async () => ({ user: userOf(request.headers) }),
    })
    let body = ''
    if (answer.body.kind === 'complete') body = answer.body.string
    else for await (const chunk of answer.body.asyncIterator) body += chunk
    return new Response(body, { status: answer.status ?? 200, headers: [...answer.headers] })
  }
}

/** Through a Fetch handler, in process. */
export async function fetchClient(server: Server): Promise<Client> {
  const handle = fetchHandler(server)
  return {
    post: async (body, headers = {}) =>
      toReply(
        await handle(
          new Request('http://apollo.test/graphql', {
            method: 'POST',
            headers: { 'content-type': 'application/json', accept: 'application/json', ...headers },
            body: JSON.stringify(body),
          }),
        ),
      ),
    close: () => server.stop(),
  }
}

/**
 * Through `server.executeOperation`, no HTTP: the key goes in `extensions.idempotencyKey` (a
 * header key becomes one), the caller in `contextValue`. The reply's status is Apollo's (200
 * when no error set one), its headers the ones Apollo would send, its text the result's JSON.
 */
export async function operationClient(server: Server): Promise<Client> {
  return {
    post: async (body, headers = {}) => {
      if (Array.isArray(body)) throw new Error('executeOperation runs one operation at a time')
      const key = headers['idempotency-key']
      const extensions =
        key === undefined ? body.extensions : { ...body.extensions, idempotencyKey: key }
      const response = await server.executeOperation(
        { ...body, extensions },
        { contextValue: { user: headers['x-user'] } },
      )
      if (response.body.kind !== 'single') throw new Error('an incremental answer')
      const { errors, data, extensions: resultExtensions } = response.body.singleResult
      const text = JSON.stringify({ errors, data, extensions: resultExtensions })
      return {
        status: response.http.status ?? 200,
        headers: new Headers([...response.http.headers]),
        text,
        json: JSON.parse(text),
      }
    },
    close: () => server.stop(),
  }
}

export const apolloTransports = [
  ['startStandaloneServer', standaloneClient],
  ['expressMiddleware', expressClient],
  ['a Fetch handler', fetchClient],
  ['server.executeOperation', operationClient],
] as const

/** Apollo Server (through a Fetch handler) as a host of the GraphQL cases both servers share. */
export const apolloHost = {
  name: 'Apollo Server',
  incrementalAccept: {},
  async setup({ plugin, engine, schema, batching, masking }: HostOptions = {}) {
    const fixture = createApolloFixture({
      plugin,
      engine,
      schema,
      apollo: {
        allowBatchedHttpRequests: batching,
        formatError: masking === 'custom' ? maskUnexpectedErrors(maskedMessage) : undefined,
      },
    })
    return { ...fixture, client: await fetchClient(fixture.server) }
  },
} satisfies GraphQLHost
