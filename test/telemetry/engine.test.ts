import { PGlite } from '@electric-sql/pglite'
import { trace } from '@opentelemetry/api'
import { AlwaysOffSampler, BasicTracerProvider } from '@opentelemetry/sdk-trace-base'
import { drizzle } from 'drizzle-orm/pglite'
import { afterAll, beforeEach, describe, expect, it, vi } from 'vitest'
import {
  createIdempotency,
  createMemoryStore,
  type IdempotencyOptions,
  type StoreTransaction,
} from '../../src'
import {
  createDrizzleStore,
  idempotencyKeys,
  mysqlIdempotencyKeys,
  sqliteIdempotencyKeys,
} from '../../src/stores/drizzle'
import { attributeNames, metricNames } from '../../src/telemetry'
import { storeKind } from '../../src/telemetry/options'
import { countOf, createRecordingSdk, operationSpans, parentOf } from './sdk'

/** The engine called directly, with the SDK registered globally. */
const sdk = createRecordingSdk({ register: true })
afterAll(() => sdk.shutdown())
beforeEach(() => sdk.reset())

const quiet = { logger: { warn() {}, error() {} } }
const engine = (options: Partial<IdempotencyOptions> = {}) =>
  createIdempotency({ store: createMemoryStore(), ...quiet, ...options })
const request = (key: string) => ({ key, operation: 'payments.charge', payload: { amount: 5 } })

describe('telemetry of the engine', () => {
  it("nests the operation span under the caller's active span, and the handler's spans under it", async () => {
    const idempotency = engine()
    const tracer = trace.getTracer('test')
    await tracer.startActiveSpan('POST /charges', async (request_) => {
      await idempotency.execute(request('k-nested'), async () =>
        tracer.startActiveSpan('provider.charge', async (span) => span.end()),
      )
      request_.end()
    })
    const spans = sdk.spans()
    const byName = (name: string) => spans.find((span) => span.name === name)!
    const operation = byName('idempotency payments.charge')
    expect(parentOf(operation)).toBe(byName('POST /charges').spanContext().spanId)
    for (const child of ['provider.charge', 'idempotency claim', 'idempotency complete']) {
      expect(parentOf(byName(child)), child).toBe(operation.spanContext().spanId)
    }
    expect(operation.attributes).toEqual({
      'idempotency.operation': 'payments.charge',
      'idempotency.store': 'memory',
      'idempotency.outcome': 'executed',
    })
  })

  it('puts the key on the span only when asked to, and never on metrics', async () => {
    await engine({ telemetry: { recordKeys: true } }).execute(request('k-asked'), () => 1)
    const [operation] = operationSpans(sdk.spans())
    expect(operation!.attributes[attributeNames.key]).toBe('k-asked')
    const points = await sdk.points(metricNames.operations)
    expect(points.some((point) => attributeNames.key in point.attributes)).toBe(false)
  })

  it("records how long a duplicate waited with concurrency: 'wait', on its span and in a histogram", async () => {
    const idempotency = engine({ concurrency: 'wait' })
    let finish!: () => void
    const running = new Promise<void>((resolve) => {
      finish = resolve
    })
    const first = idempotency.execute(request('k-wait'), () => running.then(() => 'charged'))
    await vi.waitFor(() => expect(sdk.spans()).toHaveLength(1)) // the first claim
    const duplicate = idempotency.execute(request('k-wait'), () => 'charged twice')
    setTimeout(finish, 50)
    expect(await Promise.all([first, duplicate])).toEqual([
      { value: 'charged', replayed: false },
      { value: 'charged', replayed: true },
    ])
    const replayed = operationSpans(sdk.spans()).find(
      (span) => span.attributes[attributeNames.outcome] === 'replayed',
    )!
    const waited = replayed.attributes[attributeNames.waitDuration] as number
    expect(waited).toBeGreaterThan(0.02)
    expect(waited).toBeLessThan(5)
    const [point] = await sdk.points(metricNames.waitDuration)
    expect(point!.attributes[attributeNames.outcome]).toBe('replayed')
    expect(await sdk.unit(metricNames.waitDuration)).toBe('s')
  })

  it('records into the providers it is given instead of the global ones', async () => {
    const own = createRecordingSdk({ register: false })
    const { tracerProvider, meterProvider } = own
    await engine({ telemetry: { tracerProvider, meterProvider } }).execute(
      request('k-own'),
      () => 1,
    )
    expect(operationSpans(own.spans())).toHaveLength(1)
    expect(sdk.spans()).toEqual([])
    expect(countOf(await own.points(metricNames.operations), {})).toBe(1)
    await own.shutdown()
  })

  it('records nothing with telemetry: false', async () => {
    const before = countOf(await sdk.points(metricNames.operations), {})
    await engine({ telemetry: false }).execute(request('k-off'), () => 1)
    expect(sdk.spans()).toEqual([])
    expect(countOf(await sdk.points(metricNames.operations), {})).toBe(before)
  })

  it('counts each operation once, by outcome and operation', async () => {
    const idempotency = engine()
    const operation = { 'idempotency.operation': 'payments.refund' }
    const refund = { ...request('k-count'), operation: 'payments.refund' }
    await idempotency.execute(refund, () => 1)
    await idempotency.execute(refund, () => 1)
    const points = await sdk.points(metricNames.operations)
    expect(countOf(points, { ...operation, 'idempotency.outcome': 'executed' })).toBe(1)
    expect(countOf(points, { ...operation, 'idempotency.outcome': 'replayed' })).toBe(1)
    expect(await sdk.unit(metricNames.operations)).toBe('{operation}')
  })

  it('traces transactional mode: the claim and the commit are the children', async () => {
    const db = drizzle(new PGlite())
    const store = createDrizzleStore(db)
    await store.ensureTable()
    const idempotency = createIdempotency({ store, transactional: true, ...quiet })
    await idempotency.execute(request('k-tx'), async () => 1)
    const [operation] = operationSpans(sdk.spans())
    expect(operation!.attributes).toMatchObject({
      'idempotency.store': 'postgresql',
      'idempotency.outcome': 'executed',
    })
    const children = sdk
      .spans()
      .filter((span) => parentOf(span) === operation!.spanContext().spanId)
    expect(children.map((span) => span.name).sort()).toEqual([
      'idempotency claim',
      'idempotency complete',
    ])
  })
})

describe('telemetry of transactional mode failing open', () => {
  it('ends the operation as store_error when the claim fails open; the handler still runs', async () => {
    const down = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })
    const session: StoreTransaction = {
      handle: {},
      claim: () => Promise.reject(down),
      complete: async () => true,
      savepoint: (inner) => inner(session),
    }
    const store = {
      ...createMemoryStore(),
      transaction: <T>(fn: (s: StoreTransaction) => Promise<T>) => fn(session),
    }
    const idempotency = engine({ store, transactional: true, onStoreError: 'fail-open' })
    const before = countOf(await sdk.points(metricNames.operations), {
      'idempotency.outcome': 'store_error',
    })
    expect(await idempotency.execute(request('k-open'), async () => 1)).toEqual({
      value: 1,
      replayed: false,
    })
    const [operation] = operationSpans(sdk.spans())
    expect(operation?.attributes).toMatchObject({
      'idempotency.outcome': 'store_error',
      'error.type': 'ECONNREFUSED',
    })
    const after = countOf(await sdk.points(metricNames.operations), {
      'idempotency.outcome': 'store_error',
    })
    expect(after - before).toBe(1)
  })
})

describe('telemetry of a COMMIT whose answer was lost', () => {
  it('ends the operation as outcome_unknown, an error span with the driver code', async () => {
    const reset = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' })
    const memory = createMemoryStore()
    const session: StoreTransaction = {
      handle: {},
      claim: async (input) => ({
        claimed: true,
        takeover: false,
        record: {
          ...input,
          status: 'in_progress',
          response: null,
          lockedUntil: Date.now() + input.lockTimeoutMs,
          expiresAt: Date.now() + input.lockTimeoutMs,
        },
      }),
      complete: async () => true,
      savepoint: (inner) => inner(session),
    }
    const store = {
      ...memory,
      async transaction<T>(fn: (s: StoreTransaction) => Promise<T>): Promise<T> {
        await fn(session)
        throw reset
      },
    }
    const idempotency = engine({ store, transactional: true })
    await expect(idempotency.execute(request('k-lost'), async () => 1)).rejects.toMatchObject({
      code: 'OUTCOME_UNKNOWN',
    })
    const [operation] = operationSpans(sdk.spans())
    expect(operation?.attributes).toMatchObject({
      'idempotency.outcome': 'outcome_unknown',
      'error.type': 'ECONNRESET',
    })
    expect(operation?.status.code).toBe(2)
  })
})

describe('telemetry that throws', () => {
  it('never fails the request: a tracer provider that throws records nothing, and the call runs', async () => {
    const broken = {
      getTracer() {
        throw new Error('a broken tracer provider')
      },
    }
    const idempotency = engine({ telemetry: { tracerProvider: broken as never } })
    expect(await idempotency.execute(request('k-broken'), () => 1)).toEqual({
      value: 1,
      replayed: false,
    })
    expect(await idempotency.execute(request('k-broken'), () => 2)).toEqual({
      value: 1,
      replayed: true,
    })
  })
})

describe('a sampler that drops the operation', () => {
  it("still makes the operation's span the handler's parent, so the handler's spans follow its decision", async () => {
    const tracerProvider = new BasicTracerProvider({ sampler: new AlwaysOffSampler() })
    const idempotency = engine({ telemetry: { tracerProvider } })
    let active: ReturnType<typeof trace.getActiveSpan>
    await idempotency.execute(request('k-dropped'), () => {
      active = trace.getActiveSpan()
      return 1
    })
    expect(active).toBeDefined()
    expect(active!.isRecording()).toBe(false)
  })
})

describe('the store in attributes', () => {
  it('names the shipped stores, and any other store custom, unless given a name', async () => {
    const memory = createMemoryStore()
    // The transactional test above runs the Drizzle store itself; here, its shape.
    const drizzleStore = { ...memory, inProcess: false }
    expect(storeKind(memory)).toBe('memory')
    expect(storeKind({ ...drizzleStore, table: idempotencyKeys })).toBe('postgresql')
    expect(storeKind({ ...drizzleStore, table: mysqlIdempotencyKeys })).toBe('mysql')
    expect(storeKind({ ...drizzleStore, table: sqliteIdempotencyKeys })).toBe('sqlite')
    expect(storeKind({ ...memory, inProcess: false, recordKey: () => '', library: 'x' })).toBe(
      'redis',
    )
    expect(storeKind({ ...memory, inProcess: false })).toBe('custom')

    await engine({ telemetry: { store: 'dynamodb' } }).execute(request('k-named'), () => 1)
    const [operation] = operationSpans(sdk.spans())
    expect(operation!.attributes[attributeNames.store]).toBe('dynamodb')
  })
})
