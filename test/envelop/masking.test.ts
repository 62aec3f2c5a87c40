import type { GraphQLError } from 'graphql'
import { createSchema } from 'graphql-yoga'
import { describe, expect, it, vi } from 'vitest'
import { idempotentDirectiveTypeDefs } from '../../adapters/envelop'
import { createFixture, fetchClient, typeDefs } from './fixtures'

async function setup(options?: Parameters<typeof createFixture>[0]) {
  const fixture = createFixture(options)
  return { ...fixture, client: await fetchClient(fixture.yoga) }
}

const failing = { query: 'mutation { failUnexpectedly { id } }' }
const rejecting = (reason: string, status?: number) => ({
  query: `mutation { rejectOrder(reason: "${reason}"${status ? `, status: ${status}` : ''}) { id } }`,
})

describe('useIdempotency and error masking', () => {
  it('masks with the server own message on both attempts and runs the resolver each time', async () => {
    const { client, resolvers } = await setup({
      yoga: { maskedErrors: { errorMessage: 'Something broke, try again.' } },
    })
    const first = await client.post(failing, { 'idempotency-key': 'f-1' })
    const second = await client.post(failing, { 'idempotency-key': 'f-1' })
    expect(first.json.errors[0].message).toBe('Something broke, try again.')
    expect(second.text).toBe(first.text)
    expect(resolvers.failUnexpectedly).toHaveBeenCalledTimes(2)
  })

  it('records an unexpected error that storeErrors keeps in its masked form only', async () => {
    const { client, resolvers } = await setup({ plugin: { storeErrors: () => true } })
    const first = await client.post(failing, { 'idempotency-key': 'f-2' })
    const second = await client.post(failing, { 'idempotency-key': 'f-2' })
    expect(resolvers.failUnexpectedly).toHaveBeenCalledTimes(1)
    expect(second.headers.get('idempotent-replay')).toBe('true')
    expect(second.status).toBe(first.status)
    expect(second.text).toBe(first.text)
    expect(second.text).toContain('Unexpected error.')
    expect(second.text).not.toContain('hunter2')
  })

  it('calls storeErrors with each error and records only when every call says yes', async () => {
    const storeErrors = vi.fn((error: GraphQLError) => error.message.endsWith('keep'))
    const { client, resolvers } = await setup({ plugin: { storeErrors } })
    const two = {
      query:
        'mutation { a: rejectOrder(reason: "keep") { id } b: rejectOrder(reason: "drop") { id } }',
    }
    await client.post(two, { 'idempotency-key': 'two-1' })
    await client.post(two, { 'idempotency-key': 'two-1' })
    expect(resolvers.rejectOrder).toHaveBeenCalledTimes(4)
    expect(storeErrors.mock.calls[0]![0].message).toBe('Order rejected: keep')
    expect(storeErrors.mock.calls[0]![0].path).toEqual(['a'])

    const one = { query: 'mutation { rejectOrder(reason: "keep") { id } }' }
    await client.post(one, { 'idempotency-key': 'one-1' })
    await client.post(one, { 'idempotency-key': 'one-1' })
    expect(resolvers.rejectOrder).toHaveBeenCalledTimes(5)
  })

  it('releases the key when storeErrors throws, logs it, and answers the result as it was', async () => {
    const logger = { warn: vi.fn(), error: vi.fn() }
    const storeErrors = () => {
      throw new Error('the policy broke')
    }
    const { client, resolvers } = await setup({ plugin: { storeErrors, logger } })
    const first = await client.post(rejecting('no'), { 'idempotency-key': 'thrown-1' })
    const second = await client.post(rejecting('no'), { 'idempotency-key': 'thrown-1' })
    expect(resolvers.rejectOrder).toHaveBeenCalledTimes(2)
    expect(second.headers.get('idempotent-replay')).toBeNull()
    expect(second.text).toBe(first.text)
    expect(first.json.errors[0].message).toBe('Order rejected: no')
    expect(logger.error).toHaveBeenCalledWith(
      'storeErrors threw; the key is released',
      expect.objectContaining({ message: 'the policy broke' }),
    )
  })

  it('replays an expected error with its own HTTP status', async () => {
    const { client, resolvers } = await setup()
    const first = await client.post(rejecting('gone', 404), { 'idempotency-key': 'r-404' })
    const second = await client.post(rejecting('gone', 404), { 'idempotency-key': 'r-404' })
    expect(first.status).toBe(404)
    expect(second.status).toBe(404)
    expect(second.text).toBe(first.text)
    expect(first.json.errors[0].extensions).toEqual({ code: 'ORDER_REJECTED' })
    expect(resolvers.rejectOrder).toHaveBeenCalledTimes(1)
  })

  it.each([503, 429, 409, 408])(
    'releases the key for an expected error with status %i, so a retry runs again',
    async (status) => {
      const { client, resolvers, store } = await setup()
      await client.post(rejecting('busy', status), { 'idempotency-key': 'r-busy' })
      await client.post(rejecting('busy', status), { 'idempotency-key': 'r-busy' })
      expect(resolvers.rejectOrder).toHaveBeenCalledTimes(2)
      expect(store.complete).not.toHaveBeenCalled()
    },
  )

  it('releases the key for an unexpected error when the server does not mask', async () => {
    const { client, resolvers } = await setup({ yoga: { maskedErrors: false } })
    const first = await client.post(failing, { 'idempotency-key': 'f-3' })
    await client.post(failing, { 'idempotency-key': 'f-3' })
    expect(first.text).toContain('hunter2')
    expect(resolvers.failUnexpectedly).toHaveBeenCalledTimes(2)
  })
})

describe('useIdempotency and incremental delivery', () => {
  const deferTypeDefs = `directive @defer(if: Boolean, label: String) on FRAGMENT_SPREAD | INLINE_FRAGMENT
    directive @stream(if: Boolean, label: String, initialCount: Int = 0) on FIELD`
  const deferred = {
    query: 'mutation { createOrder(item: "a") { id ... @defer { item } } }',
  }

  async function setupDefer() {
    const createOrder = vi.fn(() => ({ id: '1', item: 'a', quantity: 1 }))
    const schema = createSchema({
      typeDefs: [idempotentDirectiveTypeDefs, deferTypeDefs, typeDefs],
      resolvers: { Mutation: { createOrder } },
    })
    return { ...(await setup({ schema })), createOrder }
  }

  it('refuses a keyed mutation that uses @defer with 400, runs nothing and records nothing', async () => {
    const { client, createOrder, store } = await setupDefer()
    const reply = await client.post(deferred, { 'idempotency-key': 'd-1' })
    expect(reply.status).toBe(400)
    expect(reply.json.errors[0].extensions).toEqual({
      code: 'IDEMPOTENCY_INCREMENTAL_DELIVERY_UNSUPPORTED',
    })
    expect(createOrder).not.toHaveBeenCalled()
    expect(store.claim).not.toHaveBeenCalled()
  })

  it('runs a @defer mutation without a key as usual', async () => {
    const { client, createOrder } = await setupDefer()
    const reply = await client.post(deferred, { accept: 'multipart/mixed' })
    expect(reply.status).toBe(200)
    expect(reply.text).toContain('"item":"a"')
    expect(createOrder).toHaveBeenCalledTimes(1)
  })
})
