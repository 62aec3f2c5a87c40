import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import {
  createTRPCClient,
  httpBatchLink,
  httpBatchStreamLink,
  httpLink,
  TRPCClientError,
} from '@trpc/client'
import { initTRPC, TRPCError } from '@trpc/server'
import { createExpressMiddleware } from '@trpc/server/adapters/express'
import { type CreateFastifyContextOptions, fastifyTRPCPlugin } from '@trpc/server/adapters/fastify'
import { fetchRequestHandler } from '@trpc/server/adapters/fetch'
import { createNextApiHandler } from '@trpc/server/adapters/next'
import { createHTTPHandler } from '@trpc/server/adapters/standalone'
import express from 'express'
import Fastify from 'fastify'
import superjson from 'superjson'
import { vi } from 'vitest'
import { ZodError, z } from 'zod'
import {
  createIdempotencyMiddleware,
  getIdempotencyError,
  type IdempotencyMeta,
  type IdempotencyMiddlewareOptions,
} from '../../adapters/trpc'
import {
  createIdempotency,
  createMemoryStore,
  type IdempotencyOptions,
  type IdempotencyStore,
} from '../../src'

/**
 * What the HTTP adapters put in the context: the fetch one (`req`, `resHeaders`), the Node ones
 * (standalone, Express, Next.js pages: `req`, `res`), or Fastify's (its request and reply).
 */
export interface Context {
  req?: Request | IncomingMessage | { headers: unknown; url: string }
  resHeaders?: Headers
  res?: ServerResponse | { header(name: string, value: string): unknown }
  /** The caller, from the `x-user` request header: the scope. */
  user?: string
}

export interface Deferred<T = void> {
  promise: Promise<T>
  resolve(value: T): void
}

export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void
  const promise = new Promise<T>((r) => {
    resolve = r
  })
  return { promise, resolve }
}

export interface AppOptions {
  /** Use superjson as the tRPC transformer. @default false */
  superjson?: boolean
  store?: IdempotencyStore
  engine?: Partial<IdempotencyOptions>
  /** Middleware options on top of the fixture's (scope from `ctx.user`, `root: t`). */
  middleware?: Partial<IdempotencyMiddlewareOptions<Context>>
}

/**
 * A router whose resolvers are spies. Its errorFormatter adds what clients read: the engine's
 * SPEC code (`data.idempotency`), a zod flattening that only works on a real ZodError cause,
 * and the cause's name.
 */
export function createApp(options: AppOptions = {}) {
  const t = initTRPC
    .context<Context>()
    .meta<IdempotencyMeta>()
    .create({
      ...(options.superjson ? { transformer: superjson } : {}),
      errorFormatter: ({ shape, error }) => ({
        ...shape,
        data: {
          ...shape.data,
          idempotency: getIdempotencyError(error)?.code ?? null,
          zod: error.cause instanceof ZodError ? z.flattenError(error.cause) : null,
          causeName: error.cause?.name ?? null,
        },
      }),
    })
  const store = options.store ?? createMemoryStore()
  const idempotency = createIdempotency({ store, ...options.engine })
  const idempotent = t.procedure.use(
    createIdempotencyMiddleware({
      idempotency,
      scope: ({ ctx }) => ctx.user,
      root: t,
      ...options.middleware,
    }),
  )
  const slowStarted = deferred()
  const slowRelease = deferred()
  const spies = {
    create: vi.fn((input: { name: string }) => ({ id: `order-${input.name}`, name: input.name })),
    list: vi.fn(() => ['a', 'b']),
    rich: vi.fn(() => ({
      at: new Date('2024-02-29T12:00:00.000Z'),
      tags: new Map([['vip', 1n]]),
      big: 2n ** 70n,
      nothing: undefined,
    })),
    reject: vi.fn((name: string): never => {
      throw new TRPCError({ code: 'BAD_REQUEST', message: `no orders for ${name}` })
    }),
    crash: vi.fn((): string => {
      throw new Error('database exploded')
    }),
    // The first call blocks until the test releases it; later ones (a broken middleware letting
    // a duplicate through) return at once, so such a failure shows as a failed assertion.
    slow: vi.fn(async () => {
      if (spies.slow.mock.calls.length === 1) {
        slowStarted.resolve()
        await slowRelease.promise
      }
      return 'done'
    }),
  }
  // Streamed outputs (httpBatchStreamLink): rows from an async generator, a failure part-way,
  // promises as members. `failNextStream(error)` makes the next `rows` stream throw it after its first row.
  const streamFailure: { next: unknown } = { next: undefined }
  const streamGate = deferred()
  const streams = {
    rows: vi.fn(async function* (name: string) {
      yield { row: 1, name }
      const failure = streamFailure.next
      streamFailure.next = undefined
      if (failure !== undefined) throw failure
      yield { row: 2, at: new Date('2024-02-29T12:00:00.000Z'), gone: undefined }
      return 'end'
    }),
    // Yields one row, then waits for the test to open the gate: a stream still being read.
    held: vi.fn(async function* () {
      yield { row: 1 }
      await streamGate.promise
      yield { row: 2 }
    }),
    deferred: vi.fn((name: string) => ({
      name,
      receipt: Promise.resolve({ id: `receipt-${name}`, lines: Promise.resolve([1, 2]) }),
      events: (async function* () {
        yield 'placed'
        yield { status: 'paid', at: new Date(0) }
      })(),
    })),
  }
  const orderInput = z.object({ name: z.string().min(3), idempotencyKey: z.string().optional() })
  const router = t.router({
    order: t.router({
      create: idempotent.input(orderInput).mutation(({ input }) => spies.create(input)),
      archive: idempotent.input(orderInput).mutation(({ input }) => spies.create(input)),
      list: idempotent.input(orderInput.optional()).query(() => spies.list()),
      rich: idempotent.input(orderInput.optional()).mutation(() => spies.rich()),
      reject: idempotent.input(orderInput).mutation(({ input }) => spies.reject(input.name)),
      crash: idempotent.input(orderInput.optional()).mutation(() => spies.crash()),
      slow: idempotent.input(orderInput.optional()).mutation(() => spies.slow()),
      rows: idempotent.input(orderInput).mutation(({ input }) => streams.rows(input.name)),
      deferred: idempotent.input(orderInput).mutation(({ input }) => streams.deferred(input.name)),
      held: idempotent.input(orderInput).mutation(() => streams.held()),
      strict: idempotent
        .meta({ idempotency: { required: true, ttl: '1h' } })
        .input(orderInput.optional())
        .mutation(() => spies.create({ name: 'strict' })),
    }),
  })
  const superjsonOn = Boolean(options.superjson)
  return {
    t,
    router,
    spies,
    streams,
    /** The error the next `rows` stream throws after its first row. */
    failNextStream: (error: unknown) => {
      streamFailure.next = error
    },
    /** Lets the `held` stream go on past its first row. */
    openStreamGate: () => streamGate.resolve(),
    store,
    idempotency,
    slowStarted,
    slowRelease,
    superjson: superjsonOn,
  }
}

export type App = ReturnType<typeof createApp>
export type AppRouter = App['router']

/** What the client saw of one HTTP response. */
export interface SeenResponse {
  key: string | null
  /** The call's `call` context (sent as `x-call`), which tells concurrent calls' responses apart. */
  call: string | null
  status: number
  replay: string | null
  retryAfter: string | null
}

export type Transport = 'fetch' | 'standalone' | 'express' | 'fastify' | 'next'
export type LinkKind = 'http' | 'batch' | 'batch-stream'

/** Per-call client options: the key, the caller and a call id go out as request headers. */
export interface CallContext {
  key?: string
  user?: string
  call?: string
  [name: string]: unknown
}

function headersFor(context: CallContext | undefined): Record<string, string> {
  const headers: Record<string, string> = {}
  if (context?.key !== undefined) headers['idempotency-key'] = context.key
  if (context?.user !== undefined) headers['x-user'] = context.user
  if (context?.call !== undefined) headers['x-call'] = context.call
  return headers
}

/**
 * Serves `app` through a real tRPC adapter (fetch in process, or the standalone Node server on
 * a free port) and returns a real client whose fetch records each response's status and headers.
 */
export async function serve(app: App, transport: Transport, link: LinkKind = 'http') {
  const responses: SeenResponse[] = []
  let baseFetch: typeof fetch
  let url: string
  let close = async () => {}
  if (transport === 'fetch') {
    url = 'http://in-process/trpc'
    baseFetch = async (input, init) =>
      fetchRequestHandler({
        endpoint: '/trpc',
        req: new Request(input, init),
        router: app.router,
        createContext: ({ req, resHeaders }) => ({
          req,
          resHeaders,
          user: req.headers.get('x-user') ?? undefined,
        }),
      })
  } else {
    const served = await listen(app, transport)
    url = served.url
    baseFetch = fetch
    close = served.close
  }
  const recordingFetch: typeof fetch = async (input, init) => {
    const response = await baseFetch(input, init)
    const headers = new Headers(init?.headers)
    responses.push({
      key: headers.get('idempotency-key'),
      call: headers.get('x-call'),
      status: response.status,
      replay: response.headers.get('idempotent-replay'),
      retryAfter: response.headers.get('retry-after'),
    })
    return response
  }
  const linkOptions = {
    url,
    fetch: recordingFetch,
    // The transformer option is typed per router; this fixture serves both kinds.
    ...(app.superjson ? { transformer: superjson } : {}),
  }
  const makeLink =
    link === 'http'
      ? httpLink({
          ...linkOptions,
          headers: ({ op }: { op: { context: CallContext } }) => headersFor(op.context),
        } as never)
      : (link === 'batch' ? httpBatchLink : httpBatchStreamLink)({
          ...linkOptions,
          headers: ({ opList }: { opList: { context: CallContext }[] }) =>
            headersFor(opList[0]?.context),
        } as never)
  const client = createTRPCClient<AppRouter>({ links: [makeLink] })
  return { client, responses, url, fetch: recordingFetch, close }
}

function userOf(headers: IncomingMessage['headers']): string | undefined {
  const user = headers['x-user']
  return typeof user === 'string' ? user : undefined
}

/** Serves `app` on a free port through one of tRPC's Node adapters, each with its context line. */
async function listen(app: App, transport: Exclude<Transport, 'fetch'>) {
  const { router } = app
  if (transport === 'fastify') {
    const server = Fastify()
    await server.register(fastifyTRPCPlugin, {
      prefix: '/trpc',
      trpcOptions: {
        router,
        createContext: ({ req, res }: CreateFastifyContextOptions) => ({
          req,
          res,
          user: userOf(req.headers),
        }),
      },
    })
    await server.listen({ port: 0, host: '127.0.0.1' })
    const { port } = server.server.address() as AddressInfo
    return { url: `http://127.0.0.1:${port}/trpc`, close: () => server.close() }
  }
  let handler: (req: IncomingMessage, res: ServerResponse) => void
  let path = ''
  if (transport === 'express') {
    const expressApp = express()
    expressApp.use(
      '/trpc',
      createExpressMiddleware({
        router,
        createContext: ({ req, res }) => ({ req, res, user: userOf(req.headers) }),
      }),
    )
    handler = expressApp
    path = '/trpc'
  } else if (transport === 'next') {
    // A Next.js pages API route (`pages/api/trpc/[trpc].ts`): Next parses the path into `query`.
    const nextHandler = createNextApiHandler({
      router,
      // Typed by hand: `next` (NextApiRequest, NextApiResponse) is not installed here.
      createContext: ({ req, res }: { req: IncomingMessage; res: ServerResponse }) => ({
        req,
        res,
        user: userOf(req.headers),
      }),
    })
    handler = (req, res) => {
      const { pathname, searchParams } = new URL(req.url ?? '/', 'http://localhost')
      const query = {
        ...Object.fromEntries(searchParams),
        trpc: pathname.slice('/api/trpc/'.length),
      }
      void nextHandler(Object.assign(req, { query }) as never, res as never)
    }
    path = '/api/trpc'
  } else {
    handler = createHTTPHandler({
      router,
      createContext: ({ req, res }) => ({ req, res, user: userOf(req.headers) }),
    })
  }
  const server = createServer(handler)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}${path}`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections()
        server.close((error) => (error ? reject(error) : resolve()))
      }),
  }
}

/** Settles a client call into what the tests compare: its value, or its error's shape. */
export async function settle<T>(call: Promise<T>) {
  try {
    return { ok: true as const, value: await call }
  } catch (error) {
    if (!(error instanceof TRPCClientError)) throw error
    const data = error.data as {
      code: string
      httpStatus: number
      idempotency: string | null
      zod: unknown
      causeName: string | null
    }
    return { ok: false as const, message: error.message, data }
  }
}
