import { SpanStatusCode } from '@opentelemetry/api'
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { createMemoryStore, type IdempotencyStore } from '../../src'
import {
  type App,
  type Call,
  type Driver,
  graphqlDriver,
  httpDriver,
  trpcDriver,
} from '../adapters/drivers'
import { apolloTransports, createApolloFixture } from '../apollo/fixtures'
import { createFixture, transports } from '../envelop/fixtures'
import { transports as httpTransports } from '../http/fixtures'
import { countOf, createRecordingSdk, operationSpans, parentOf } from './sdk'

/**
 * Every outcome of a keyed operation, through a real tRPC server and a real Yoga server, with
 * the OpenTelemetry SDK registered the way an application registers it: the library is given
 * no telemetry option at all.
 */
const sdk = createRecordingSdk({ register: true })
afterAll(() => sdk.shutdown())

const [, connectYoga] = transports[0]
const hosts: { driver: Driver; adapter: string }[] = [
  { driver: trpcDriver('fetch', false), adapter: 'trpc' },
  {
    driver: graphqlDriver('GraphQL Yoga through yoga.fetch', createFixture, (fixture) =>
      connectYoga(fixture.yoga),
    ),
    adapter: 'yoga',
  },
]

/** A store that cannot be reached. */
function unreachableStore(): IdempotencyStore {
  const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), {
    code: 'ECONNREFUSED',
  })
  return { ...createMemoryStore(), claim: () => Promise.reject(refused) }
}

/** A store whose completed records no longer read back (written by a codec since replaced). */
function unreadableStore(): IdempotencyStore {
  const store = createMemoryStore()
  return {
    ...store,
    async claim(input) {
      const result = await store.claim(input)
      if (result.claimed || result.record.status !== 'completed') return result
      return { ...result, record: { ...result.record, response: 'not an outcome' } }
    },
  }
}

describe.each(hosts)('$driver.name', ({ driver, adapter }) => {
  let app: App | undefined
  beforeEach(() => sdk.reset())
  afterEach(async () => {
    await app?.close()
    app = undefined
  })
  const open = async (store?: IdempotencyStore) => {
    app = await driver.open(store ? { store } : {})
    return app
  }
  /** The keyed operations' spans once `count` of them have ended. */
  const operations = async (count: number) => {
    await vi.waitFor(() => expect(operationSpans(sdk.spans())).toHaveLength(count))
    return operationSpans(sdk.spans())
  }
  const counted = async (outcome: string) =>
    countOf(await sdk.points('idempotency.operations'), {
      'idempotency.outcome': outcome,
      'idempotency.adapter': adapter,
    })

  it('traces a first execution as a span with its outcome, operation, adapter and store, the claim and the completion as its children, and no key', async () => {
    const { send } = await open()
    const before = await counted('executed')
    await send({ key: 'k-first' })
    const [operation] = await operations(1)
    expect(operation!.name).toBe(`idempotency ${operation!.attributes['idempotency.operation']}`)
    expect(operation!.attributes).toMatchObject({
      'idempotency.outcome': 'executed',
      'idempotency.adapter': adapter,
      'idempotency.store': 'memory',
    })
    expect(operation!.attributes['idempotency.operation']).toEqual(expect.any(String))
    expect(operation!.status.code).toBe(SpanStatusCode.UNSET)
    const children = sdk
      .spans()
      .filter((span) => parentOf(span) === operation!.spanContext().spanId)
    expect(children.map((span) => span.name).sort()).toEqual([
      'idempotency claim',
      'idempotency complete',
    ])
    for (const span of sdk.spans()) {
      expect(Object.values(span.attributes)).not.toContain('k-first')
      expect(span.attributes['idempotency.key']).toBeUndefined()
    }
    expect(await counted('executed')).toBe(before + 1)
  })

  const scenarios: {
    outcome: string
    code: string | null
    run: (app: App) => Promise<unknown>
  }[] = [
    {
      outcome: 'replayed',
      code: null,
      run: async ({ send }) => {
        await send({ key: 'k-replay' })
        return send({ key: 'k-replay' })
      },
    },
    {
      outcome: 'mismatch',
      code: 'KEY_REUSED',
      run: async ({ send }) => {
        await send({ key: 'k-mismatch', item: 'pen' })
        return send({ key: 'k-mismatch', item: 'ink' })
      },
    },
    {
      outcome: 'conflict',
      code: 'IN_PROGRESS',
      run: async ({ send, ran, release }) => {
        const first = send({ operation: 'slow', key: 'k-conflict' })
        await vi.waitFor(() => expect(ran('slow')).toBe(1))
        const duplicate = await send({ operation: 'slow', key: 'k-conflict' })
        release()
        await first
        return duplicate
      },
    },
    {
      outcome: 'released',
      code: null,
      run: ({ send }) => send({ operation: 'crash', key: 'k-crash' }),
    },
  ]

  it.each(scenarios)(
    'ends the span of a $outcome operation with that outcome and counts it',
    async ({ outcome, code, run }) => {
      const before = await counted(outcome)
      const reply = (await run(await open())) as Awaited<ReturnType<App['send']>>
      expect(reply.code).toBe(code)
      const spans = (await operations(outcome === 'released' ? 1 : 2)).filter(
        (span) => span.attributes['idempotency.outcome'] === outcome,
      )
      expect(spans).toHaveLength(1)
      expect(spans[0]!.attributes).toMatchObject({
        'idempotency.adapter': adapter,
        'idempotency.store': 'memory',
      })
      // A refusal is the client's to handle, not a failure of the library.
      expect(spans[0]!.status.code).toBe(SpanStatusCode.UNSET)
      expect(await counted(outcome)).toBe(before + 1)
    },
  )

  it('marks a takeover of a dead executor on the new execution, and the old executor loses its lease', async () => {
    let now = Date.now()
    const { send, ran, release } = await open(createMemoryStore({ now: () => now }))
    const first = send({ operation: 'slow', key: 'k-takeover' })
    await vi.waitFor(() => expect(ran('slow')).toBe(1))
    now += 61_000 // past the first executor's lease (lockTimeout 60 s)
    const second = send({ operation: 'slow', key: 'k-takeover' })
    await vi.waitFor(() => expect(ran('slow')).toBe(2))
    release()
    await Promise.all([first, second])
    const spans = await operations(2)
    const outcomes = spans.map((span) => [
      span.attributes['idempotency.outcome'],
      span.attributes['idempotency.takeover'],
    ])
    expect(outcomes).toEqual(
      expect.arrayContaining([
        ['lost_lease', undefined],
        ['executed', true],
      ]),
    )
    const takeovers = countOf(await sdk.points('idempotency.operations'), {
      'idempotency.adapter': adapter,
      'idempotency.takeover': true,
    })
    expect(takeovers).toBe(1)
  })

  it('reports a store that cannot be reached as an error span with error.type, on the operation and on its claim', async () => {
    const before = await counted('store_error')
    const reply = await (await open(unreachableStore())).send({ key: 'k-store-down' })
    expect(reply.code).toBe('STORE_UNAVAILABLE')
    const [operation] = await operations(1)
    expect(operation!.attributes).toMatchObject({
      'idempotency.outcome': 'store_error',
      'error.type': 'ECONNREFUSED',
    })
    expect(operation!.status.code).toBe(SpanStatusCode.ERROR)
    const claim = sdk.spans().find((span) => span.name === 'idempotency claim')!
    expect(claim.attributes['error.type']).toBe('ECONNREFUSED')
    expect(claim.status.code).toBe(SpanStatusCode.ERROR)
    // No message on the status: error messages can quote the data that caused them.
    expect(operation!.status.message).toBeUndefined()
    expect(await counted('store_error')).toBe(before + 1)
  })

  it('reports a record that cannot be read back as not stored', async () => {
    const before = await counted('not_stored')
    const { send } = await open(unreadableStore())
    await send({ key: 'k-unreadable' })
    const reply = await send({ key: 'k-unreadable' })
    expect(reply.code).toBe('RESPONSE_NOT_STORED')
    const spans = await operations(2)
    expect(spans.map((span) => span.attributes['idempotency.outcome'])).toEqual([
      'executed',
      'not_stored',
    ])
    expect(await counted('not_stored')).toBe(before + 1)
  })

  it('records claim and completion durations in seconds', async () => {
    const { send } = await open()
    await send({ key: 'k-durations' })
    await operations(1)
    for (const name of ['idempotency.claim.duration', 'idempotency.complete.duration']) {
      expect(await sdk.unit(name)).toBe('s')
      const points = (await sdk.points(name)).filter(
        (point) => point.attributes['idempotency.adapter'] === adapter,
      )
      expect(points.length).toBeGreaterThan(0)
      const [point] = points as { value: { count: number; sum: number } }[]
      expect(point!.value.count).toBeGreaterThan(0)
      // Seconds, not milliseconds: an in-memory claim takes well under one.
      expect(point!.value.sum / point!.value.count).toBeLessThan(1)
    }
  })

  it('records nothing for a mutation without a key', async () => {
    const { send } = await open()
    await send({} satisfies Call)
    await send({ operation: 'read', key: 'k-read' })
    expect(sdk.spans()).toEqual([])
  })
})

describe('the adapter attribute', () => {
  const memory = { name: 'memory', createStore: async () => createMemoryStore(), skip: false }
  const [apolloTransport, connectApollo] = apolloTransports[2]
  const named: { driver: Driver; adapter: string }[] = [
    ...hosts,
    {
      driver: graphqlDriver('GraphQL Yoga through node:http', createFixture, (fixture) =>
        transports[1][1](fixture.yoga),
      ),
      adapter: 'yoga',
    },
    {
      driver: graphqlDriver(`Apollo Server through ${apolloTransport}`, createApolloFixture, (f) =>
        connectApollo(f.server),
      ),
      adapter: 'apollo',
    },
    ...httpTransports.map((transport) => ({
      driver: httpDriver(transport, memory),
      adapter: transport.split(' ')[0]!,
    })),
  ]

  it.each(named)('is $adapter through $driver.name', async ({ driver, adapter }) => {
    sdk.reset()
    const app = await driver.open()
    try {
      await app.send({ key: `k-${adapter}` })
    } finally {
      await app.close()
    }
    await vi.waitFor(() => expect(operationSpans(sdk.spans())).toHaveLength(1))
    const [operation] = operationSpans(sdk.spans())
    expect(operation!.attributes['idempotency.adapter']).toBe(adapter)
  })
})
