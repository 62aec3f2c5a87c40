/**
 * `npm run demo`: why this library exists, in one run. Embedded PGlite (or `DATABASE_URL`), one
 * shared store, a server per adapter on free ports (tRPC, GraphQL Yoga, Apollo Server, Hono,
 * Express), and a story played through each with real HTTP requests: a charge whose response is
 * lost and retried, two concurrent duplicates, a key reused for another amount, and a read that
 * is never deduplicated. It prints what each step got, the trace of tRPC's retried charge as an
 * OpenTelemetry SDK recorded it, then the charges table, and exits non-zero if any expectation
 * failed.
 */
import { randomUUID } from 'node:crypto'
import type { Server } from 'node:http'
import { createServer } from 'node:http'
import { setTimeout as sleep } from 'node:timers/promises'
import { getRequestListener } from '@hono/node-server'
import { context, trace } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base'
import { eq, like } from 'drizzle-orm'
import { createIdempotency } from 'idempotent-mutations'
import { createDrizzleStore } from 'idempotent-mutations/drizzle'
import { startApolloServer } from './apollo-server'
import { createExpressApp } from './express-server'
import { createHonoApp } from './hono-server'
import { charges, listen, type Observe, openPaymentsDatabase } from './payments'
import { createTrpcServer } from './trpc-server'
import { createYogaServer } from './yoga-server'

/** How long the "payment provider" takes per charge: long enough for a retry to overlap it. */
const providerLatencyMs = 400
/** The client gives up on the first attempt after this long; the server keeps going. */
const clientTimeoutMs = 100

interface Answer {
  status: number | 'timeout'
  replayed: boolean
  retryAfter: string | null
  /** The contract's error code, if the answer is an error. */
  code?: string
  charge?: { id: number; amount: number }
}

/** One transport, seen from a plain HTTP client. */
interface Transport {
  name: string
  charge(key: string, orderId: string, amount: number, signal?: AbortSignal): Promise<Answer>
  listCharges(key: string): Promise<Answer>
}

const color = process.stdout.isTTY && !process.env.NO_COLOR
const paint = (code: number) => (text: string) => (color ? `\x1b[${code}m${text}\x1b[0m` : text)
const [bold, dim, green, red] = [paint(1), paint(2), paint(32), paint(31)]

const failures: string[] = []
let chargeRequests = 0
function expect(condition: boolean, what: string): string {
  if (!condition) failures.push(what)
  return condition ? green('✓') : red(`✗ expected ${what}`)
}

async function request(url: string, key: string, body: unknown, signal?: AbortSignal) {
  try {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key, 'x-user-id': 'alice' },
      body: JSON.stringify(body),
      signal,
    })
    return { response, json: (await response.json()) as Record<string, unknown> }
  } catch (error) {
    if ((error as Error).name === 'TimeoutError') return undefined
    throw error
  }
}

function answerOf(
  sent: Awaited<ReturnType<typeof request>>,
  read: (json: Record<string, unknown>) => Partial<Answer>,
): Answer {
  if (!sent) return { status: 'timeout', replayed: false, retryAfter: null }
  const { response, json } = sent
  return {
    status: response.status,
    replayed: response.headers.get('idempotent-replay') === 'true',
    retryAfter: response.headers.get('retry-after'),
    ...read(json),
  }
}

function trpcTransport(url: string): Transport {
  type TrpcJson = { result?: { data: never }; error?: { data?: { idempotencyCode?: string } } }
  const read = (json: TrpcJson) => ({
    charge: Array.isArray(json.result?.data) ? undefined : json.result?.data,
    code: json.error?.data?.idempotencyCode,
  })
  return {
    name: 'tRPC',
    async charge(key, orderId, amount, signal) {
      chargeRequests++
      const body = { orderId, amount, currency: 'EUR' }
      return answerOf(await request(`${url}/charge`, key, body, signal), read)
    },
    async listCharges(key) {
      const response = await fetch(`${url}/charges`, { headers: { 'idempotency-key': key } })
      return answerOf({ response, json: await response.json() }, read)
    },
  }
}

function graphqlTransport(name: string, endpoint: string): Transport {
  const mutation = `mutation Charge($orderId: String!, $amount: Int!) {
    charge(orderId: $orderId, amount: $amount, currency: "EUR") { id amount }
  }`
  type GraphQLJson = {
    data?: { charge?: never }
    errors?: { extensions?: { code?: string } }[]
  }
  const read = (json: GraphQLJson) => ({
    charge: json.data?.charge,
    code: json.errors?.[0]?.extensions?.code?.replace(/^IDEMPOTENCY_/, ''),
  })
  return {
    name,
    async charge(key, orderId, amount, signal) {
      chargeRequests++
      const body = { query: mutation, variables: { orderId, amount } }
      return answerOf(await request(endpoint, key, body, signal), read)
    },
    async listCharges(key) {
      return answerOf(await request(endpoint, key, { query: '{ charges { id } }' }), read)
    },
  }
}

/** A plain HTTP route: `POST /charges` (deduplicated), `GET /charges` (never). */
function restTransport(name: string, url: string): Transport {
  type RestJson = { id?: number; amount?: number; code?: string }
  const read = (json: RestJson | RestJson[]) =>
    Array.isArray(json)
      ? {}
      : { charge: json.id === undefined ? undefined : (json as never), code: json.code }
  return {
    name,
    async charge(key, orderId, amount, signal) {
      chargeRequests++
      const body = { orderId, amount, currency: 'EUR' }
      return answerOf(await request(`${url}/charges`, key, body, signal), read)
    },
    async listCharges(key) {
      const response = await fetch(`${url}/charges`, {
        headers: { 'idempotency-key': key, 'x-user-id': 'alice' },
      })
      return answerOf({ response, json: await response.json() }, read)
    },
  }
}

/** `GraphQL Yoga` -> `graphql-yoga`: the transport's part of an order id. */
const slug = (name: string) => name.toLowerCase().replace(/\s+/g, '-')

function describe(answer: Answer): string {
  if (answer.status === 'timeout') return dim('no answer (the client timed out)')
  const parts = [bold(String(answer.status))]
  if (answer.code) parts.push(answer.code)
  if (answer.charge) parts.push(`charge #${answer.charge.id}`)
  if (answer.replayed) parts.push('Idempotent-Replay: true')
  if (answer.retryAfter) parts.push(`Retry-After: ${answer.retryAfter}`)
  return parts.join('  ')
}

function step(n: string, what: string, result: string, check: string): void {
  console.log(`  ${n}  ${what.padEnd(58)} ${result}  ${check}`)
}

/**
 * The client's retry loop: the same key every time; a 409 is retried after its Retry-After.
 * Returns every answer, the last one being the one the client keeps.
 */
async function retryUntilAnswered(send: () => Promise<Answer>): Promise<Answer[]> {
  const answers: Answer[] = []
  for (let attempt = 1; attempt <= 5; attempt++) {
    const answer = await send()
    answers.push(answer)
    if (answer.status !== 409) break
    await sleep(Number(answer.retryAfter ?? 1) * 1000)
  }
  return answers
}

/**
 * An OpenTelemetry SDK, registered the way an application registers it, recording into memory.
 * The library is given nothing: it finds the SDK through `@opentelemetry/api`.
 */
function registerTracing() {
  const exporter = new InMemorySpanExporter()
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
  trace.setGlobalTracerProvider(provider)
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
  return { exporter, provider }
}

/** Spans as an indented tree: each under its parent, in the order they started. */
function printTrace(spans: readonly ReadableSpan[]): void {
  const ids = new Set(spans.map((span) => span.spanContext().spanId))
  const started = [...spans].sort((a, b) => hrMs(a.startTime) - hrMs(b.startTime))
  const childrenOf = (id: string | undefined) =>
    started.filter((span) => {
      const parent = span.parentSpanContext?.spanId
      return id === undefined ? parent === undefined || !ids.has(parent) : parent === id
    })
  const print = (span: ReadableSpan, indent: string, branch: string) => {
    const outcome = span.attributes['idempotency.outcome']
    const ms = Math.round(hrMs(span.duration))
    const details = [outcome ? bold(String(outcome)) : '', dim(`${ms} ms`)].filter(Boolean)
    console.log(`  ${indent}${branch}${span.name}  ${details.join('  ')}`)
    const children = childrenOf(span.spanContext().spanId)
    const inner = indent + (branch === '├─ ' ? '│  ' : branch === '└─ ' ? '   ' : '')
    children.forEach((child, i) => {
      print(child, inner, i === children.length - 1 ? '└─ ' : '├─ ')
    })
  }
  for (const root of childrenOf(undefined)) print(root, '', '')
}

const hrMs = ([seconds, nanos]: [number, number]) => seconds * 1000 + nanos / 1e6

async function story(
  transport: Transport,
  run: string,
  queries: { count: number },
  /** Called once order A's retried charge is answered. */
  onRetried?: () => void,
) {
  console.log(bold(`\n${transport.name}`))
  const order = (name: string) => `${slug(transport.name)}-${name}-${run}`
  const key1 = randomUUID()

  const lost = await transport.charge(key1, order('A'), 4200, AbortSignal.timeout(clientTimeoutMs))
  step(
    '1',
    `charge order A €42.00, client gives up after ${clientTimeoutMs} ms`,
    describe(lost),
    expect(lost.status === 'timeout', 'the first attempt to time out'),
  )

  const attempts = await retryUntilAnswered(() => transport.charge(key1, order('A'), 4200))
  const retried = attempts.at(-1)!
  attempts.slice(0, -1).forEach((answer, i) => {
    const what = i === 0 ? 'retry at once, same key' : 'retry after Retry-After, same key'
    step('2', what, describe(answer), '')
  })
  step(
    attempts.length > 1 ? '3' : '2',
    attempts.length > 1 ? 'retry after Retry-After, same key' : 'retry, same key',
    describe(retried),
    expect(
      (retried.status === 200 || retried.status === 201) && retried.replayed,
      'a replay of the lost charge',
    ),
  )
  onRetried?.()

  const key2 = randomUUID()
  const pair = await Promise.all([
    transport.charge(key2, order('B'), 1500),
    transport.charge(key2, order('B'), 1500),
  ])
  const statuses = pair.map((answer) => answer.status).sort()
  step(
    '4',
    'order B €15.00 sent twice at once, same key',
    pair.map(describe).join(dim(' | ')),
    expect(
      /^20[01],409$/.test(statuses.join()) && pair.some((answer) => answer.retryAfter !== null),
      'one success and one 409 with Retry-After',
    ),
  )

  const reused = await transport.charge(key1, order('A'), 4300)
  step(
    '5',
    'the key of order A again, but for €43.00',
    describe(reused),
    expect(reused.status === 422 && reused.code === 'KEY_REUSED', '422 KEY_REUSED'),
  )

  const before = queries.count
  const reads = [await transport.listCharges(key1), await transport.listCharges(key1)]
  const ran = queries.count - before
  step(
    '6',
    'a read sent twice with a key',
    `${reads.map(describe).join(dim(' | '))}  ran ${ran} times`,
    expect(ran === 2 && !reads.some((read) => read.replayed), 'the read to run twice'),
  )
}

async function main(): Promise<void> {
  const started = Date.now()
  const tracing = registerTracing()
  const database = await openPaymentsDatabase()
  const { db } = database
  const store = createDrizzleStore(db)
  await store.ensureTable()
  const idempotency = createIdempotency({ store, ttl: '24h', lockTimeout: '60s' })

  const queries = { count: 0 }
  const observe: Observe = async (what) => {
    if (what === 'query') queries.count++
    else {
      // The provider's side of a charge, as a span of the handler's own.
      const span = trace.getTracer('demo').startSpan('payment provider')
      await sleep(providerLatencyMs)
      span.end()
    }
  }
  const servers: Server[] = [
    createTrpcServer(db, idempotency, observe),
    createYogaServer(db, idempotency, observe),
    createServer(getRequestListener(createHonoApp(db, idempotency, observe).fetch)),
    createServer(createExpressApp(db, idempotency, observe)),
  ]
  const [trpcUrl, yogaUrl, honoUrl, expressUrl] = await Promise.all(
    servers.map((server) => listen(server, 0)),
  )
  const apollo = await startApolloServer(db, idempotency, 0, observe)
  const transports = [
    trpcTransport(trpcUrl!),
    graphqlTransport('GraphQL Yoga', `${yogaUrl}/graphql`),
    graphqlTransport('Apollo Server', apollo.url),
    restTransport('Hono', honoUrl!),
    restTransport('Express', expressUrl!),
  ]

  const run = randomUUID().slice(0, 8)
  console.log(
    `${bold('idempotent-mutations demo')}  store: ${database.label}, one table for records and charges`,
  )
  console.log(
    dim(
      `tRPC on ${trpcUrl}, GraphQL Yoga on ${yogaUrl}/graphql, Apollo Server on ${apollo.url}, Hono on ${honoUrl}, Express on ${expressUrl}`,
    ),
  )
  console.log(dim(`each charge takes ${providerLatencyMs} ms at the "payment provider"`))
  try {
    let retriedCharge: ReadableSpan[] = []
    for (const transport of transports) {
      tracing.exporter.reset()
      await story(transport, run, queries, () => {
        if (transport.name === 'tRPC') retriedCharge = [...tracing.exporter.getFinishedSpans()]
      })
    }

    console.log(bold('\ntrace of the retried charge (tRPC, order A)'))
    console.log(
      dim('  recorded by an OpenTelemetry SDK the demo registered; no tracing code in the servers'),
    )
    printTrace(retriedCharge)
    const outcomes = retriedCharge.map((span) => span.attributes['idempotency.outcome'])
    console.log(
      `  ${expect(
        outcomes.filter((outcome) => outcome === 'executed').length === 1 &&
          outcomes.includes('replayed'),
        'one executed operation and its replay in the trace',
      )} one execution, its replay to the retry`,
    )

    const rows = await db
      .select()
      .from(charges)
      .where(like(charges.orderId, `%-${run}`))
      .orderBy(charges.id)
    console.log(bold('\ncharges table'))
    console.log(dim('  id  via       order      amount'))
    for (const row of rows) {
      const order = row.orderId.replace(`-${run}`, '')
      console.log(
        `  ${String(row.id).padStart(2)}  ${row.via.padEnd(8)}  ${order.padEnd(9)}  €${(row.amount / 100).toFixed(2)}`,
      )
    }
    const orders = transports.flatMap(({ name }) =>
      ['A', 'B'].map((order) => `${slug(name)}-${order}-${run}`),
    )
    const perOrder = await Promise.all(
      orders.map(
        async (id) => (await db.select().from(charges).where(eq(charges.orderId, id))).length,
      ),
    )
    console.log(
      `  ${expect(
        perOrder.every((count) => count === 1) && rows.length === orders.length,
        'exactly one charge per key',
      )} ${rows.length} charges for ${orders.length} keys, from ${chargeRequests} charge requests: exactly one charge per key`,
    )
  } finally {
    await apollo.stop()
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))))
    await database.close()
    await tracing.provider.shutdown()
  }

  const seconds = ((Date.now() - started) / 1000).toFixed(1)
  if (failures.length) {
    console.log(red(`\n${failures.length} expectation(s) failed: ${failures.join('; ')}`))
    process.exitCode = 1
  } else {
    console.log(green(`\nevery expectation held (${seconds} s)`))
  }
}

await main()
