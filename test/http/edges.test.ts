import { Hono } from 'hono'
import { describe, expect, it } from 'vitest'
import { withIdempotency } from '../../adapters/fetch'
import { idempotency } from '../../adapters/hono'
import { createIdempotency, createMemoryStore } from '../../src'

const post = (key: string) =>
  new Request('http://app.test/pay', { method: 'POST', headers: { 'idempotency-key': key } })

describe('plain HTTP edges', () => {
  it('releases the key when the response body fails part-way: the retry runs again', async () => {
    let runs = 0
    const handler = withIdempotency(
      async () => {
        runs++
        const body = new ReadableStream({
          pull(controller) {
            controller.enqueue(new Uint8Array([1, 2]))
            controller.error(new Error('the body failed'))
          },
        })
        return new Response(body)
      },
      { idempotency: createIdempotency({ store: createMemoryStore() }) },
    )
    await expect(handler(post('k-body'))).rejects.toThrow('the body failed')
    await expect(handler(post('k-body'))).rejects.toThrow('the body failed')
    expect(runs).toBe(2)
  })

  it('gives Hono replays and refusals the headers earlier middleware set for this request, fresh', async () => {
    const app = new Hono()
    let request = 0
    app.use('*', async (c, next) => {
      c.header('x-request-id', `r-${++request}`)
      await next()
    })
    app.use('*', idempotency({ idempotency: createIdempotency({ store: createMemoryStore() }) }))
    app.post('/pay', (c) => c.json({ ok: true }))
    const first = await app.request(post('k-hono'))
    const retry = await app.request(post('k-hono'))
    const refused = await app.request(
      new Request('http://app.test/pay', { method: 'POST', headers: { 'idempotency-key': 'a b' } }),
    )
    expect(first.headers.get('x-request-id')).toBe('r-1')
    expect(retry.headers.get('idempotent-replay')).toBe('true')
    expect(retry.headers.get('x-request-id')).toBe('r-2')
    expect(refused.status).toBe(400)
    expect(refused.headers.get('x-request-id')).toBe('r-3')
  })

  it('answers refusals as RFC 9457 problem details: the status phrase as title, the code beside it', async () => {
    const handler = withIdempotency(async () => new Response('ok'), {
      idempotency: createIdempotency({ store: createMemoryStore() }),
      required: true,
    })
    const refused = await handler(new Request('http://app.test/pay', { method: 'POST' }))
    expect(await refused.json()).toEqual({
      type: 'about:blank',
      title: 'Bad Request',
      status: 400,
      detail: expect.any(String),
      code: 'KEY_REQUIRED',
    })
  })
})
