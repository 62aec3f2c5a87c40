import express from 'express'
import { Hono } from 'hono'
import { describe, expect, it, vi } from 'vitest'
import { idempotency as expressIdempotency } from '../../adapters/express'
import { idempotencyContext, withIdempotency } from '../../adapters/fetch'
import { idempotency as honoIdempotency, type IdempotencyVariables } from '../../adapters/hono'
import { createIdempotency, createMemoryStore, type IdempotencyError } from '../../src'
import { json } from './fixtures'

const engine = () => createIdempotency({ store: createMemoryStore() })
const request = (path: string, init: RequestInit & { key?: string } = {}) =>
  new Request(`http://app.test${path}`, {
    method: 'POST',
    ...init,
    headers: { ...(init.key ? { 'idempotency-key': init.key } : {}), ...(init.headers as object) },
  })

describe('options of the plain-HTTP adapters', () => {
  it('takes the IETF quoted form of the key, and refuses one over 255 characters or not ASCII', async () => {
    const runs = vi.fn(async () => new Response('ok'))
    const handler = withIdempotency(runs, { idempotency: engine() })
    await handler(request('/pay', { key: '"8e03978e"' }))
    const bare = await handler(request('/pay', { key: '8e03978e' }))
    expect(bare.headers.get('idempotent-replay')).toBe('true')
    for (const key of ['x'.repeat(256), 'clé']) {
      const refused = await handler(
        new Request('http://app.test/pay', {
          method: 'POST',
          headers: [['idempotency-key', key]] as [string, string][],
        }),
      ).catch((error: Error) => error)
      if (refused instanceof Response) expect(refused.status).toBe(400)
      else expect(refused).toBeInstanceOf(TypeError) // Headers refuse a non-ByteString value
    }
    expect(runs).toHaveBeenCalledTimes(1)
  })

  it('counts the query string only with includeQuery, and deduplicates only the listed methods', async () => {
    const runs = vi.fn(async () => new Response('ok'))
    const plain = withIdempotency(runs, { idempotency: engine() })
    await plain(request('/pay?a=1', { key: 'k-q' }))
    expect(
      (await plain(request('/pay?a=2', { key: 'k-q' }))).headers.get('idempotent-replay'),
    ).toBe('true')
    const withQuery = withIdempotency(runs, { idempotency: engine(), includeQuery: true })
    await withQuery(request('/pay?a=1', { key: 'k-q' }))
    expect(
      (await withQuery(request('/pay?a=2', { key: 'k-q' }))).headers.get('idempotent-replay'),
    ).toBeNull()
    const putToo = withIdempotency(runs, { idempotency: engine(), methods: ['put'] })
    await putToo(request('/pay', { key: 'k-m', method: 'PUT' }))
    expect(
      (await putToo(request('/pay', { key: 'k-m', method: 'PUT' }))).headers.get(
        'idempotent-replay',
      ),
    ).toBe('true')
    await putToo(request('/pay', { key: 'k-m2' }))
    expect(
      (await putToo(request('/pay', { key: 'k-m2' }))).headers.get('idempotent-replay'),
    ).toBeNull()
  })

  it('records the statuses storeStatus says, and releases the others', async () => {
    const runs = vi.fn(async () => new Response('busy', { status: 503 }))
    const handler = withIdempotency(runs, { idempotency: engine(), storeStatus: () => true })
    await handler(request('/pay', { key: 'k-s' }))
    const retry = await handler(request('/pay', { key: 'k-s' }))
    expect([retry.status, retry.headers.get('idempotent-replay')]).toEqual([503, 'true'])
    expect(runs).toHaveBeenCalledTimes(1)
  })

  it("releases the key when storeStatus throws, and logs it through the engine's logger", async () => {
    const logger = { warn: vi.fn(), error: vi.fn() }
    // The engine's logger, as the engine exposes it to adapters.
    const idempotency = Object.assign(createIdempotency({ store: createMemoryStore(), logger }), {
      logger,
    })
    const runs = vi.fn(async () => new Response('ok', { status: 201 }))
    const storeStatus = () => {
      throw new Error('the policy broke')
    }
    const handler = withIdempotency(runs, { idempotency, storeStatus })
    const first = await handler(request('/pay', { key: 'k-t' }))
    const retry = await handler(request('/pay', { key: 'k-t' }))
    expect([first.status, retry.status]).toEqual([201, 201])
    expect(retry.headers.get('idempotent-replay')).toBeNull()
    expect(runs).toHaveBeenCalledTimes(2)
    expect(logger.error).toHaveBeenCalledWith(
      'storeStatus threw; the key is released',
      expect.objectContaining({ message: 'the policy broke' }),
    )
  })

  it('hands the lease to the handler: idempotencyContext and c.get (deriveKey differs per key)', async () => {
    const derived: string[] = []
    const fetchHandler = withIdempotency(
      async (req: Request) => {
        derived.push(idempotencyContext(req)!.deriveKey('psp'))
        return new Response('ok')
      },
      { idempotency: engine() },
    )
    const app = new Hono<{ Variables: IdempotencyVariables }>()
    app.use('*', honoIdempotency({ idempotency: engine() }))
    app.post('/pay', (c) => c.text(c.get('idempotency').deriveKey('psp')))
    await fetchHandler(request('/pay', { key: 'k-l' }))
    await fetchHandler(request('/pay', { key: 'k-l2' }))
    const fromHono = await (await app.request(request('/pay', { key: 'k-l' }))).text()
    expect(derived[0]).toMatch(/\S{16,}/)
    expect(derived[1]).not.toBe(derived[0])
    expect(fromHono).toMatch(/\S{16,}/)
  })

  it('passes refusals to next(error) with errors: "next", before the routes run', async () => {
    const app = express()
    app.use(express.json())
    app.use(expressIdempotency({ idempotency: engine(), errors: 'next', required: true }))
    app.post('/pay', (_req, res) => {
      res.json({ ok: true })
    })
    const seen: IdempotencyError[] = []
    app.use(
      (
        error: IdempotencyError,
        _req: express.Request,
        res: express.Response,
        _next: express.NextFunction,
      ) => {
        seen.push(error)
        res.status(error.status).json({ mine: error.code })
      },
    )
    const { createServer } = await import('node:http')
    const server = createServer(app)
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const { port } = server.address() as { port: number }
    const response = await fetch(`http://127.0.0.1:${port}/pay`, {
      method: 'POST',
      ...json({ a: 1 }),
    })
    server.close()
    expect(response.status).toBe(400)
    expect(await response.json()).toEqual({ mine: 'KEY_REQUIRED' })
    expect(seen[0]?.code).toBe('KEY_REQUIRED')
  })
})
