import { trace } from '@opentelemetry/api'
import { afterAll, beforeEach, describe, expect, it } from 'vitest'
import { withIdempotency } from '../../adapters/fetch'
import { createIdempotency, createMemoryStore } from '../../src'
import { createFixture, createOrder, fetchClient } from '../envelop/fixtures'
import { createApp, serve } from '../trpc/fixtures'
import { createRecordingSdk, operationSpans, parentOf } from './sdk'

/**
 * Through an adapter, the business handler runs with the operation's span active: the spans it
 * starts (its queries, its calls to a payment provider) are the operation's children.
 */
const sdk = createRecordingSdk({ register: true })
afterAll(() => sdk.shutdown())
beforeEach(() => sdk.reset())

/** What a handler does at its payment provider: a span of its own. */
const callProvider = () => trace.getTracer('test').startSpan('payment provider').end()

function expectProviderUnderOperation() {
  const [operation] = operationSpans(sdk.spans())
  const provider = sdk.spans().find((span) => span.name === 'payment provider')!
  expect(parentOf(provider)).toBe(operation!.spanContext().spanId)
}

describe("the handler's spans", () => {
  it('are children of the operation under tRPC', async () => {
    const app = createApp()
    app.spies.create.mockImplementationOnce((input) => {
      callProvider()
      return { id: `order-${input.name}`, name: input.name }
    })
    const server = await serve(app, 'fetch')
    try {
      await server.client.order.create.mutate({ name: 'pen' }, { context: { key: 'k-trpc' } })
    } finally {
      await server.close()
    }
    expectProviderUnderOperation()
  })

  it('are children of the operation under Yoga', async () => {
    const fixture = createFixture()
    fixture.resolvers.createOrder.mockImplementationOnce((_, args) => {
      callProvider()
      return { id: '1', item: args.item, quantity: args.quantity }
    })
    const client = await fetchClient(fixture.yoga)
    await client.post(
      { query: createOrder, variables: { item: 'pen', quantity: 1 } },
      { 'idempotency-key': 'k-yoga' },
    )
    expectProviderUnderOperation()
  })

  it('are children of the operation under the Fetch adapter', async () => {
    const idempotency = createIdempotency({ store: createMemoryStore() })
    const route = withIdempotency(
      async () => {
        callProvider()
        return Response.json({ id: 1 }, { status: 201 })
      },
      { idempotency },
    )
    const response = await route(
      new Request('http://localhost/charges', {
        method: 'POST',
        headers: { 'idempotency-key': 'k-fetch', 'content-type': 'application/json' },
        body: '{"amount":5}',
      }),
    )
    expect(response.status).toBe(201)
    expectProviderUnderOperation()
  })
})
