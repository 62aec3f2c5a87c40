import { describe, expect, it } from 'vitest'
import { createMemoryStore } from '../../src'
import { createFixture, createOrder, fetchClient } from './fixtures'

const body = { query: createOrder, variables: { item: 'book' } }

describe('useIdempotency when something around it fails', () => {
  it('releases the key when a plugin after it throws before execution, so the retry runs', async () => {
    let failNext = true
    const fixture = createFixture({
      pluginsAfter: [
        {
          onExecute() {
            if (failNext) throw new Error('tracing backend down')
          },
        },
      ],
    })
    const client = await fetchClient(fixture.yoga)
    const first = await client.post(body, { 'idempotency-key': 'p-1' })
    expect(first.json.errors[0].message).toBe('Unexpected error.')
    expect(fixture.resolvers.createOrder).not.toHaveBeenCalled()
    expect(fixture.store.release).toHaveBeenCalledTimes(1)
    failNext = false
    const retry = await client.post(body, { 'idempotency-key': 'p-1' })
    expect(retry.json.data.createOrder.item).toBe('book')
    expect(fixture.resolvers.createOrder).toHaveBeenCalledTimes(1)
  })

  it('releases the key when the result hook chain breaks before reaching it', async () => {
    const store = createMemoryStore()
    const fixture = createFixture({
      store,
      pluginsBefore: [
        {
          onExecutionResult() {
            throw new Error('metrics exporter down')
          },
        },
      ],
    })
    const client = await fetchClient(fixture.yoga)
    await client.post(body, { 'idempotency-key': 'p-2' })
    expect(fixture.resolvers.createOrder).toHaveBeenCalledTimes(1)
    expect(fixture.store.release).toHaveBeenCalledTimes(1)
    expect(await store.get(JSON.stringify(['', 'createOrder']), 'p-2')).toBeUndefined()
  })

  it('answers 503 IDEMPOTENCY_STORE_UNAVAILABLE and runs nothing when the store is down', async () => {
    const down = createMemoryStore()
    down.claim = async () => {
      throw new Error('connection refused')
    }
    const fixture = createFixture({ store: down, engine: { logger: { warn() {}, error() {} } } })
    const client = await fetchClient(fixture.yoga)
    const reply = await client.post(body, { 'idempotency-key': 'down-1' })
    expect(reply.status).toBe(503)
    expect(reply.json.errors[0].extensions).toEqual({ code: 'IDEMPOTENCY_STORE_UNAVAILABLE' })
    expect(fixture.resolvers.createOrder).not.toHaveBeenCalled()
  })

  it('answers 422 IDEMPOTENCY_RESPONSE_NOT_STORED to the retry of a result over maxResponseBytes', async () => {
    const fixture = createFixture({ engine: { maxResponseBytes: 10 } })
    const client = await fetchClient(fixture.yoga)
    const first = await client.post(body, { 'idempotency-key': 'big-1' })
    const retry = await client.post(body, { 'idempotency-key': 'big-1' })
    expect(first.json.data.createOrder.item).toBe('book')
    expect(retry.status).toBe(422)
    expect(retry.json.errors[0].extensions).toEqual({ code: 'IDEMPOTENCY_RESPONSE_NOT_STORED' })
    expect(fixture.resolvers.createOrder).toHaveBeenCalledTimes(1)
  })
})
