import type { ApolloServerOptions } from '@apollo/server'
import { GraphQLError } from 'graphql'
import { describe, expect, it, vi } from 'vitest'
import { describeGraphQLFailureCases } from '../adapters/graphql-cases'
import { apolloHost, type Context, createApolloFixture, expressClient } from './fixtures'

async function setup(options?: Parameters<typeof createApolloFixture>[0]) {
  const fixture = createApolloFixture(options)
  return { ...fixture, client: await expressClient(fixture.server) }
}

const rejecting = (reason: string, status?: number) => ({
  query: `mutation { rejectOrder(reason: "${reason}"${status ? `, status: ${status}` : ''}) { id } }`,
})
const keyed = (key: string) => ({ 'idempotency-key': key })

describe('idempotencyPlugin and Apollo error formatting', () => {
  it('replays an expected error exactly as formatError left it, never more', async () => {
    const formatError = vi.fn<NonNullable<ApolloServerOptions<Context>['formatError']>>(
      (formatted) => ({ message: 'Your order was declined.', extensions: formatted.extensions }),
    )
    const { client, resolvers } = await setup({ apollo: { formatError } })
    const first = await client.post(rejecting('card expired'), keyed('r-1'))
    const second = await client.post(rejecting('card expired'), keyed('r-1'))
    expect(first.json.errors).toEqual([
      { message: 'Your order was declined.', extensions: { code: 'ORDER_REJECTED' } },
    ])
    expect(second.headers.get('idempotent-replay')).toBe('true')
    expect(second.text).toBe(first.text)
    expect(second.text).not.toContain('card expired')
    expect(resolvers.rejectOrder).toHaveBeenCalledTimes(1)
    // A replay is sent as it was recorded: formatError is not run on it again.
    expect(formatError).toHaveBeenCalledTimes(1)
  })

  it('calls storeErrors with the error before formatError, and replays the formatted one', async () => {
    const storeErrors = vi.fn(() => true)
    const { client, resolvers } = await setup({
      apollo: { formatError: () => ({ message: 'declined' }) },
      plugin: { storeErrors },
    })
    const one = rejecting('keep')
    await client.post(one, keyed('one-1'))
    const replay = await client.post(one, keyed('one-1'))
    expect(storeErrors).toHaveBeenCalledWith(
      expect.objectContaining({
        message: 'Order rejected: keep',
        path: ['rejectOrder'],
        originalError: expect.any(GraphQLError),
      }),
    )
    expect(resolvers.rejectOrder).toHaveBeenCalledTimes(1)
    expect(replay.json.errors).toEqual([{ message: 'declined' }])
  })

  it('replays with its stack trace a result recorded with includeStacktraceInErrorResponses, as the client first saw it', async () => {
    const { client, resolvers } = await setup({
      apollo: { includeStacktraceInErrorResponses: true },
    })
    const first = await client.post(rejecting('traced'), keyed('trace-1'))
    const second = await client.post(rejecting('traced'), keyed('trace-1'))
    expect(first.json.errors[0].extensions.stacktrace).toEqual(expect.any(Array))
    expect(second.text).toBe(first.text)
    expect(resolvers.rejectOrder).toHaveBeenCalledTimes(1)
  })
})

describeGraphQLFailureCases(apolloHost)

describe('idempotencyPlugin and an executor that answers incrementally', () => {
  it('releases the key, with a warning, when it answers a keyed mutation incrementally anyway', async () => {
    const logger = { warn: vi.fn(), error: vi.fn() }
    // An executor that streams every operation: the document had no @defer to refuse.
    const legacyExperimentalExecuteIncrementally = vi.fn(async () => ({
      initialResult: { data: { createOrder: { id: '1' } }, hasNext: true },
      subsequentResults: (async function* () {
        yield { incremental: [{ data: { item: 'a' }, path: ['createOrder'] }], hasNext: false }
      })(),
    }))
    const { client, store } = await setup({
      plugin: { logger },
      apollo: { legacyExperimentalExecuteIncrementally },
    })
    const request = { query: 'mutation { createOrder(item: "a") { id } }' }
    const accept = { accept: 'multipart/mixed; deferSpec=20220824' }
    const reply = await client.post(request, { ...keyed('d-2'), ...accept })
    expect(reply.status).toBe(200)
    expect(reply.text).toContain('"hasNext":false')
    expect(legacyExperimentalExecuteIncrementally).toHaveBeenCalledTimes(1)
    expect(store.release).toHaveBeenCalledTimes(1)
    expect(store.complete).not.toHaveBeenCalled()
    expect(logger.warn).toHaveBeenCalledWith(
      'mutation createOrder was answered incrementally; its result was not recorded and the key was released',
    )
  })
})
