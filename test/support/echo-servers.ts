import { initTRPC } from '@trpc/server'
import { fetchRequestHandler } from '@trpc/server/adapters/fetch'
import { createSchema, createYoga } from 'graphql-yoga'
import superjson from 'superjson'
import { vi } from 'vitest'
import { useIdempotency } from '../../adapters/envelop'
import { createIdempotencyMiddleware } from '../../adapters/trpc'
import {
  createIdempotency,
  createMemoryStore,
  type IdempotencyEventType,
  type IdempotencyStore,
} from '../../src'

/** One HTTP answer, as bytes. */
export interface Answer {
  status: number
  body: string
  replay: string | null
}

const quiet = { warn: () => {}, error: () => {} }

async function answer(response: Response): Promise<Answer> {
  // A stream tRPC itself cannot finish (an item its transformer refuses, such as superjson with
  // a `__proto__` key) breaks off: the client sees what came before and the failure.
  const body = await response.text().catch((thrown: unknown) => `<broken off: ${String(thrown)}>`)
  return { status: response.status, body, replay: response.headers.get('idempotent-replay') }
}

/**
 * A tRPC app (through its fetch adapter, in process) whose keyed mutations return what the test
 * puts in `output`: `echo` returns it, `rows` streams its items from an async generator, `parts`
 * returns its `{ value, delay }` items as promises that settle after their delays.
 */
export function createTRPCEcho(options: { superjson: boolean; store?: IdempotencyStore }) {
  // Not in development mode: a 500's stack (which differs on every call) stays out of the body.
  const t = initTRPC.create({
    isDev: false,
    ...(options.superjson ? { transformer: superjson } : {}),
  })
  const state = { output: undefined as unknown }
  const echo = vi.fn(() => state.output)
  const rows = vi.fn(async function* () {
    for (const item of state.output as unknown[]) yield item
  })
  // Each item of `output` as a promise member that settles after its own delay (out of order).
  const parts = vi.fn(() => {
    const items = state.output as { value: unknown; delay: number }[]
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
    return Object.fromEntries(
      items.map(({ value, delay }, i) => [`p${i}`, sleep(delay).then(() => value)]),
    )
  })
  const store = options.store ?? createMemoryStore()
  const waiting: { type: IdempotencyEventType; resolve: () => void }[] = []
  const idempotency = createIdempotency({
    store,
    logger: quiet,
    onEvent: (event) => {
      for (const wait of waiting.filter((w) => w.type === event.type)) {
        waiting.splice(waiting.indexOf(wait), 1)
        wait.resolve()
      }
    },
  })
  /** Resolves at the engine's next event of `type`: a stream's lease settles after it is read. */
  const nextEvent = (type: IdempotencyEventType) =>
    new Promise<void>((resolve) => waiting.push({ type, resolve }))
  const procedure = t.procedure.use(createIdempotencyMiddleware({ idempotency, root: t }))
  const router = t.router({
    echo: procedure.mutation(() => echo()),
    rows: procedure.mutation(() => rows()),
    parts: procedure.mutation(() => parts()),
  })
  const input = options.superjson ? '{"json":{}}' : '{}'

  /** POSTs to `path` (`echo`, or `rows?batch=1` for jsonl) under `key`, as bytes. */
  async function call(key: string, path = 'echo', headers: Record<string, string> = {}) {
    const batch = path.includes('batch=1')
    const response = await fetchRequestHandler({
      endpoint: '/trpc',
      router,
      req: new Request(`http://trpc.test/trpc/${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': key, ...headers },
        body: batch ? `{"0":${input}}` : input,
      }),
      createContext: ({ req, resHeaders }) => ({ req, resHeaders }),
      // tRPC itself throws for some outputs (a getter that throws, read by its stream test):
      // what the first caller then gets is tRPC's, and a retry must still not run it again.
    }).catch((thrown: unknown) => new Response(String(thrown), { status: 599 }))
    return answer(response)
  }
  /** The `rows` stream as `httpBatchStreamLink` asks for it. */
  const callStream = (key: string, path = 'rows') =>
    call(key, `${path}?batch=1`, { 'trpc-accept': 'application/jsonl' })
  return { state, echo, rows, parts, call, callStream, nextEvent }
}

/** A Yoga server (through `yoga.fetch`) whose `echo` mutation returns `state.output` whole. */
export function createYogaEcho(options: { store?: IdempotencyStore } = {}) {
  const state = { output: undefined as unknown }
  // A resolver that returns an Error fails its field (graphql-js), which releases the key by the
  // failure policy: such an output goes one level down.
  const echo = vi.fn(() => (state.output instanceof Error ? { error: state.output } : state.output))
  const idempotency = createIdempotency({
    store: options.store ?? createMemoryStore(),
    logger: quiet,
  })
  const yoga = createYoga({
    logging: false,
    schema: createSchema({
      typeDefs: 'scalar Any\ntype Query { ok: Int }\ntype Mutation { echo: Any }',
      // A scalar that hands Yoga the value as it is: the whole output reaches the wire.
      resolvers: { Any: { serialize: (value: unknown) => value } as never, Mutation: { echo } },
    }),
    plugins: [useIdempotency({ idempotency })],
  })
  const call = async (key: string) =>
    answer(
      await yoga.fetch('http://yoga.test/graphql', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify({ query: 'mutation { echo }' }),
      }),
    )
  return { state, echo, call }
}
