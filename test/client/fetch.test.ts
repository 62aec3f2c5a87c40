import { describe, expect, it, vi } from 'vitest'
import { idempotentFetch } from '../../adapters/client'
import { cutOffResponse, json, recordingSleep, type Step, scriptedFetch, uuid } from './support'

const url = 'http://localhost/graphql'
const ok = () => json(200, { data: { createOrder: { id: 1 } } })
const mutation = 'mutation Create { createOrder(total: 5) { id } }'
const post = (body: unknown, headers: Record<string, string> = {}): RequestInit => ({
  method: 'POST',
  headers: { 'content-type': 'application/json', ...headers },
  body: JSON.stringify(body),
})
const gqlError = (code: string, extra: Record<string, unknown> = {}) => ({
  errors: [{ message: code, extensions: { code, ...extra } }],
})

function setup(steps: Step[], options: Parameters<typeof idempotentFetch>[1] = {}) {
  const script = scriptedFetch(steps)
  const { sleep, delays } = recordingSleep()
  const onRetry = vi.fn()
  const fetch = idempotentFetch(script.fetch, { sleep, onRetry, ...options })
  return { ...script, fetch, delays, onRetry }
}

describe('idempotentFetch with a scripted fetch', () => {
  it('passes a query through untouched: same arguments, no key, no retry', async () => {
    const script = setup(['network'])
    const init = post({ query: '{ orders { id } }' })
    await expect(script.fetch(url, init)).rejects.toThrow('fetch failed')
    expect(script.requests).toHaveLength(1)
    expect(script.keys()).toEqual([null])
  })

  it('hands a query its arguments as given, without reading the body', async () => {
    const inner = vi.fn(async (_input: RequestInfo | URL, _init?: RequestInit) => ok())
    const init = post({ query: 'query { orders { id } }' })
    await idempotentFetch(inner)(url, init)
    expect(inner).toHaveBeenCalledTimes(1)
    expect(inner.mock.calls[0]?.[0]).toBe(url)
    expect(inner.mock.calls[0]?.[1]).toBe(init)
  })

  it('keys a mutation and resends it with the same key after a network failure', async () => {
    const script = setup(['network', ok()])
    const response = await script.fetch(url, post({ query: mutation }))
    expect(await response.json()).toEqual({ data: { createOrder: { id: 1 } } })
    const [first, second] = script.keys()
    expect(first).toMatch(uuid)
    expect(second).toBe(first)
    expect(script.onRetry).toHaveBeenCalledWith(
      expect.objectContaining({ attempt: 1, kind: 'network', key: first }),
    )
  })

  it('gives two separate calls with the same body two different keys', async () => {
    const script = setup([ok(), ok()])
    await script.fetch(url, post({ query: mutation }))
    await script.fetch(url, post({ query: mutation }))
    const [a, b] = script.keys()
    expect(a).toMatch(uuid)
    expect(b).toMatch(uuid)
    expect(a).not.toBe(b)
  })

  it('selects the operation by operationName, as the server does', async () => {
    const document = `query List { orders { id } } ${mutation}`
    const script = setup([ok(), ok()])
    await script.fetch(url, post({ query: document, operationName: 'List' }))
    await script.fetch(url, post({ query: document, operationName: 'Create' }))
    expect(script.keys()[0]).toBeNull()
    expect(script.keys()[1]).toMatch(uuid)
  })

  it('does not take the word mutation inside a query for a mutation', async () => {
    const script = setup([ok()])
    const query = '# a mutation comment\nquery { search(text: "mutation { x }") { id } }'
    await script.fetch(url, post({ query }))
    expect(script.keys()).toEqual([null])
  })

  it('retries a 409 after its Retry-After and returns the replay', async () => {
    const inProgress = json(409, gqlError('IDEMPOTENCY_IN_PROGRESS'), { 'retry-after': '2' })
    const script = setup([inProgress, ok()])
    const response = await script.fetch(url, post({ query: mutation }))
    expect(response.status).toBe(200)
    expect(script.delays).toEqual([2000])
    expect(script.onRetry).toHaveBeenCalledWith(
      expect.objectContaining({ status: 409, code: 'IN_PROGRESS', retryAfter: 2000, delay: 2000 }),
    )
    expect(new Set(script.keys()).size).toBe(1)
  })

  it('retries a 200 whose GraphQL errors say IN_PROGRESS or STORE_UNAVAILABLE', async () => {
    const script = setup([
      json(200, gqlError('IDEMPOTENCY_IN_PROGRESS', { retryAfter: 1 })),
      json(200, gqlError('IDEMPOTENCY_STORE_UNAVAILABLE')),
      ok(),
    ])
    const response = await script.fetch(url, post({ query: mutation }))
    expect(await response.json()).toEqual({ data: { createOrder: { id: 1 } } })
    expect(script.requests).toHaveLength(3)
    expect(script.delays[0]).toBe(1000)
  })

  it.each([
    [422, 'IDEMPOTENCY_KEY_REUSED'],
    [422, 'IDEMPOTENCY_RESPONSE_NOT_STORED'],
    [400, 'IDEMPOTENCY_KEY_INVALID'],
    [400, 'BAD_USER_INPUT'],
  ])('surfaces a %i %s at once, with its body intact', async (status, code) => {
    const script = setup([json(status, gqlError(code))])
    const response = await script.fetch(url, post({ query: mutation }))
    expect(response.status).toBe(status)
    expect(await response.json()).toEqual(gqlError(code))
    expect(script.requests).toHaveLength(1)
    expect(script.onRetry).not.toHaveBeenCalled()
  })

  it('returns the last 503 after maxAttempts, each attempt with the same key', async () => {
    const unavailable = () => json(503, gqlError('IDEMPOTENCY_STORE_UNAVAILABLE'))
    const script = setup([unavailable(), unavailable(), unavailable()], {
      maxAttempts: 3,
      backoff: { jitter: false, initialDelay: 50 },
    })
    const response = await script.fetch(url, post({ query: mutation }))
    expect(response.status).toBe(503)
    expect(script.requests).toHaveLength(3)
    expect(new Set(script.keys()).size).toBe(1)
    expect(script.delays).toEqual([50, 100])
  })

  it('throws the network error once maxAttempts connections failed', async () => {
    const script = setup(['network', 'network'], { maxAttempts: 2 })
    await expect(script.fetch(url, post({ query: mutation }))).rejects.toThrow('fetch failed')
    expect(script.requests).toHaveLength(2)
  })

  it('retries a response whose body is cut off while it is read', async () => {
    const script = setup([cutOffResponse(), ok()])
    const response = await script.fetch(url, post({ query: mutation }))
    expect(await response.json()).toEqual({ data: { createOrder: { id: 1 } } })
    expect(script.onRetry).toHaveBeenCalledWith(expect.objectContaining({ kind: 'network' }))
  })

  it('keeps the key a request already carries, in a header or in its extensions', async () => {
    const script = setup(['network', ok(), ok()])
    await script.fetch(url, post({ query: mutation }, { 'Idempotency-Key': 'mine-1' }))
    await script.fetch(url, post({ query: mutation, extensions: { idempotencyKey: 'mine-2' } }))
    expect(script.keys()).toEqual(['mine-1', 'mine-1', null])
  })

  it('adds no header when the mutation passes idempotencyKey as an argument', async () => {
    const script = setup([ok(), ok()])
    await script.fetch(url, post({ query: 'mutation { pay(idempotencyKey: "arg-1") { id } }' }))
    await script.fetch(
      url,
      post({
        query: 'mutation Pay($input: PayInput!) { pay(input: $input) { id } }',
        variables: { input: { amount: 1, idempotencyKey: 'arg-2' } },
      }),
    )
    expect(script.keys()).toEqual([null, null])
  })

  it('keys each mutation of a batched body in its extensions and retries the batch whole', async () => {
    const batch = [
      { query: mutation },
      { query: '{ orders { id } }' },
      { query: mutation, extensions: { idempotencyKey: 'mine' } },
      { query: 'mutation { cancel { id } }', extensions: { trace: true } },
    ]
    const results = [{ data: {} }, { data: {} }, { data: {} }, { data: {} }]
    const inProgress = [
      { data: {} },
      { data: {} },
      gqlError('IDEMPOTENCY_IN_PROGRESS'),
      { data: {} },
    ]
    const script = setup([json(200, inProgress), json(200, results)])
    const response = await script.fetch(url, post(batch))
    expect(await response.json()).toEqual(results)
    expect(script.keys()).toEqual([null, null])
    const [first, second] = (await script.bodies()).map((b) => JSON.parse(b))
    expect(second).toEqual(first)
    expect(first[0].extensions.idempotencyKey).toMatch(uuid)
    expect(first[1].extensions).toBeUndefined()
    expect(first[2].extensions).toEqual({ idempotencyKey: 'mine' })
    expect(first[3].extensions).toEqual({
      trace: true,
      idempotencyKey: expect.stringMatching(uuid),
    })
    expect(first[3].extensions.idempotencyKey).not.toBe(first[0].extensions.idempotencyKey)
  })

  it('keys a mutation given as a Request object', async () => {
    const script = setup(['network', ok()])
    await script.fetch(new Request(url, post({ query: mutation })))
    const [a, b] = script.keys()
    expect(a).toMatch(uuid)
    expect(b).toBe(a)
    expect(JSON.parse((await script.bodies())[1]!)).toEqual({ query: mutation })
  })

  it('keys a multipart upload by its operations field and resends its files', async () => {
    const script = setup(['network', ok()])
    const form = new FormData()
    form.append('operations', JSON.stringify({ query: mutation, variables: { file: null } }))
    form.append('map', JSON.stringify({ 0: ['variables.file'] }))
    form.append('0', new Blob(['hello']), 'a.txt')
    await script.fetch(url, { method: 'POST', body: form })
    expect(script.keys()[0]).toMatch(uuid)
    expect(script.keys()[1]).toBe(script.keys()[0])
    const resent = await script.requests[1]!.formData()
    expect(await (resent.get('0') as Blob).text()).toBe('hello')
  })

  it('stops waiting and sends nothing more when the call is aborted during backoff', async () => {
    const controller = new AbortController()
    const script = scriptedFetch(['network', ok()])
    const fetch = idempotentFetch(script.fetch, {
      sleep: async (_ms, signal) => {
        controller.abort()
        signal?.throwIfAborted()
      },
    })
    const call = fetch(url, { ...post({ query: mutation }), signal: controller.signal })
    await expect(call).rejects.toMatchObject({ name: 'AbortError' })
    expect(script.requests).toHaveLength(1)
  })

  it('stops every call when the signal option aborts, while it waits to retry', async () => {
    const shutdown = new AbortController()
    const script = scriptedFetch(['network', ok()])
    const fetch = idempotentFetch(script.fetch, {
      signal: shutdown.signal,
      sleep: async (_ms, signal) => {
        shutdown.abort(new Error('shutting down'))
        signal?.throwIfAborted()
      },
    })
    await expect(fetch(url, post({ query: mutation }))).rejects.toThrow('shutting down')
    expect(script.requests).toHaveLength(1)
  })

  it('fails with KEY_INVALID and sends nothing when generateKey returns a bad key', async () => {
    const script = setup([ok()], { generateKey: () => 'has space' })
    await expect(script.fetch(url, post({ query: mutation }))).rejects.toMatchObject({
      code: 'KEY_INVALID',
      status: 400,
    })
    expect(script.requests).toHaveLength(0)
  })

  it('hands a successful event stream over unread', async () => {
    const stream = new Response('data: {}\n\n', {
      headers: { 'content-type': 'text/event-stream' },
    })
    const script = setup([stream])
    const response = await script.fetch(url, post({ query: mutation }))
    expect(response).toBe(stream)
    expect(response.bodyUsed).toBe(false)
  })
})
