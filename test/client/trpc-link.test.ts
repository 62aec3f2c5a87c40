import {
  createTRPCClient,
  httpBatchLink,
  httpLink,
  loggerLink,
  splitLink,
  type TRPCClientError,
  type TRPCLink,
} from '@trpc/client'
import { initTRPC } from '@trpc/server'
import { describe, expect, it, vi } from 'vitest'
import { z } from 'zod'
import {
  type IdempotencyLinkOptions,
  idempotencyHeaders,
  idempotencyLink,
  withIdempotencyHeaders,
} from '../../adapters/client'
import {
  cutOffResponse,
  json,
  recordingSleep,
  type Step,
  scriptedFetch,
  silentLogger,
  uuid,
} from './support'

// Only the router's type matters here: every answer comes from the scripted fetch.
const t = initTRPC.create()
const router = t.router({
  create: t.procedure.input(z.object({ total: z.number() })).mutation(() => ({ id: 1 })),
  list: t.procedure.query(() => [] as number[]),
})
type Router = typeof router

const url = 'http://localhost/trpc'
const data = (value: unknown) => json(200, { result: { data: value } })
const trpcError = (status: number, code: string, headers: Record<string, string> = {}) =>
  json(
    status,
    { error: { message: code, code: -32000, data: { code, httpStatus: status } } },
    headers,
  )

/** The recipe from the docs: mutations one per request with the key header, the rest batched. */
function setup(
  steps: Step[],
  options: IdempotencyLinkOptions = {},
  mutationLink?: TRPCLink<Router>,
) {
  const script = scriptedFetch(steps)
  const { sleep, delays } = recordingSleep()
  const onRetry = vi.fn()
  const logger = silentLogger()
  const client = createTRPCClient<Router>({
    links: [
      idempotencyLink({ sleep, onRetry, logger, ...options }),
      splitLink({
        condition: (op) => op.type === 'mutation',
        true: mutationLink ?? httpLink({ url, fetch: script.fetch, headers: idempotencyHeaders }),
        false: httpBatchLink({ url, fetch: script.fetch }),
      }),
    ],
  })
  return { ...script, client, delays, onRetry, logger }
}

describe('idempotencyLink with a scripted fetch', () => {
  it('sends a mutation with one key and resends it with the same key after a network failure', async () => {
    const script = setup(['network', data({ id: 1 })])
    await expect(script.client.create.mutate({ total: 5 })).resolves.toEqual({ id: 1 })
    const [first, second] = script.keys()
    expect(first).toMatch(uuid)
    expect(second).toBe(first)
    expect(await script.bodies()).toEqual(['{"total":5}', '{"total":5}'])
  })

  it('never keys or retries a query', async () => {
    const script = setup(['network'])
    await expect(script.client.list.query()).rejects.toThrow('fetch failed')
    expect(script.requests).toHaveLength(1)
    expect(script.keys()).toEqual([null])
  })

  it('gives two mutate() calls with the same input two different keys', async () => {
    const script = setup([data({ id: 1 }), data({ id: 2 })])
    await script.client.create.mutate({ total: 5 })
    await script.client.create.mutate({ total: 5 })
    const [a, b] = script.keys()
    expect(a).not.toBe(b)
  })

  it('retries a 409 after its Retry-After and returns the replay', async () => {
    const script = setup([trpcError(409, 'CONFLICT', { 'retry-after': '1' }), data({ id: 1 })])
    await expect(script.client.create.mutate({ total: 5 })).resolves.toEqual({ id: 1 })
    expect(script.delays).toEqual([1000])
    expect(script.onRetry).toHaveBeenCalledWith(
      expect.objectContaining({ kind: 'response', status: 409, retryAfter: 1000, delay: 1000 }),
    )
  })

  it.each([
    [422, 'UNPROCESSABLE_CONTENT'],
    [400, 'BAD_REQUEST'],
    [404, 'NOT_FOUND'],
  ])('surfaces a %i %s without a retry', async (status, code) => {
    const script = setup([trpcError(status, code)])
    const error = (await script.client.create
      .mutate({ total: 5 })
      .catch((e) => e)) as TRPCClientError<Router>
    expect(error.data?.httpStatus).toBe(status)
    expect(error.data?.code).toBe(code)
    expect(script.requests).toHaveLength(1)
  })

  it('retries a 502 from a proxy whose body is not JSON, as a lost answer', async () => {
    const badGateway = new Response('<html>Bad Gateway</html>', { status: 502 })
    const script = setup([badGateway, data({ id: 1 })])
    await expect(script.client.create.mutate({ total: 5 })).resolves.toEqual({ id: 1 })
    // httpLink drops the response when its body is not JSON: the link sees no status at all.
    expect(script.onRetry).toHaveBeenCalledWith(expect.objectContaining({ kind: 'network' }))
  })

  it('retries a response whose body is cut off, as a network failure', async () => {
    const script = setup([cutOffResponse(), data({ id: 1 })])
    await expect(script.client.create.mutate({ total: 5 })).resolves.toEqual({ id: 1 })
    expect(script.onRetry).toHaveBeenCalledWith(expect.objectContaining({ kind: 'network' }))
  })

  it('gives up after maxAttempts with the last error', async () => {
    const unavailable = () => trpcError(503, 'SERVICE_UNAVAILABLE')
    const script = setup([unavailable(), unavailable(), unavailable()], { maxAttempts: 3 })
    const error = await script.client.create.mutate({ total: 5 }).catch((e) => e)
    expect(error.data.httpStatus).toBe(503)
    expect(script.requests).toHaveLength(3)
    expect(new Set(script.keys()).size).toBe(1)
  })

  it("uses the caller's own key from the call's context", async () => {
    const script = setup([data({ id: 1 })])
    await script.client.create.mutate({ total: 5 }, { context: { idempotencyKey: 'order-77' } })
    expect(script.keys()).toEqual(['order-77'])
  })

  it("sends a key the caller put in the input's idempotencyKey as the header key", async () => {
    const script = setup(['network', data({ id: 1 })])
    const input = { total: 5, idempotencyKey: 'saved-key-1' } as { total: number }
    await expect(script.client.create.mutate(input)).resolves.toEqual({ id: 1 })
    expect(script.keys()).toEqual(['saved-key-1', 'saved-key-1'])
    const conflicting = await script.client.create
      .mutate(input, { context: { idempotencyKey: 'other-key' } })
      .catch((e) => e)
    expect(conflicting.cause).toMatchObject({ code: 'KEY_INVALID' })
  })

  it('rejects an invalid key from the context with KEY_INVALID and sends nothing', async () => {
    const script = setup([data({ id: 1 })])
    const error = await script.client.create
      .mutate({ total: 5 }, { context: { idempotencyKey: 'two words' } })
      .catch((e) => e)
    expect(error.cause).toMatchObject({ code: 'KEY_INVALID' })
    expect(script.requests).toHaveLength(0)
  })

  it('with keyField, carries the key in the input through a batching link', async () => {
    const script = scriptedFetch(['network', json(200, [{ result: { data: { id: 1 } } }])])
    const client = createTRPCClient<Router>({
      links: [
        idempotencyLink({ keyField: 'idempotencyKey', sleep: recordingSleep().sleep }),
        httpBatchLink({ url, fetch: script.fetch }),
      ],
    })
    await expect(client.create.mutate({ total: 5 })).resolves.toEqual({ id: 1 })
    const [first, second] = (await script.bodies()).map((b) => JSON.parse(b)['0'])
    expect(first).toEqual({ total: 5, idempotencyKey: expect.stringMatching(uuid) })
    expect(second).toEqual(first)
  })

  it('does not retry, and warns once, when the terminating link never sent the key', async () => {
    const script = scriptedFetch(['network', 'network'])
    const setupWithoutHeaders = setup([], {}, httpLink({ url, fetch: script.fetch }))
    const { client, logger } = setupWithoutHeaders
    await expect(client.create.mutate({ total: 5 })).rejects.toThrow('fetch failed')
    await expect(client.create.mutate({ total: 5 })).rejects.toThrow('fetch failed')
    expect(script.requests).toHaveLength(2)
    expect(logger.warn).toHaveBeenCalledTimes(1)
    expect(logger.warn.mock.calls[0]?.[0]).toMatch(/Idempotency-Key was not sent/)
  })

  it('stops and sends nothing more when the call is aborted during backoff', async () => {
    const controller = new AbortController()
    const script = setup(['network', data({ id: 1 })], {
      sleep: async (_ms, signal) => {
        controller.abort()
        signal?.throwIfAborted()
      },
    })
    const error = await script.client.create
      .mutate({ total: 5 }, { signal: controller.signal })
      .catch((e) => e)
    expect(error.cause).toMatchObject({ name: 'AbortError' })
    expect(script.requests).toHaveLength(1)
  })

  it('works below links that pipe operators, such as loggerLink', async () => {
    const script = scriptedFetch(['network', data({ id: 1 })])
    const log = vi.fn()
    const client = createTRPCClient<Router>({
      links: [
        loggerLink({ enabled: () => true, console: { log, error: log } }),
        idempotencyLink({ sleep: recordingSleep().sleep }),
        httpLink({ url, fetch: script.fetch, headers: idempotencyHeaders }),
      ],
    })
    await expect(client.create.mutate({ total: 5 })).resolves.toEqual({ id: 1 })
    expect(log).toHaveBeenCalledTimes(2)
    expect(script.requests).toHaveLength(2)
  })

  it('merges your headers with the key and drops a stray Idempotency-Key of yours', async () => {
    const merged = scriptedFetch([data({ id: 1 })])
    const client = createTRPCClient<Router>({
      links: [
        idempotencyLink(),
        httpLink({
          url,
          fetch: merged.fetch,
          headers: withIdempotencyHeaders(() => ({
            authorization: 'Bearer t',
            'idempotency-key': 'stale',
          })),
        }),
      ],
    })
    await client.create.mutate({ total: 5 })
    const [request] = merged.requests
    expect(request!.headers.get('authorization')).toBe('Bearer t')
    expect(request!.headers.get('idempotency-key')).toMatch(uuid)
  })
})
