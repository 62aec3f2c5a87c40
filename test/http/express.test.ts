import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import express from 'express'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { idempotency } from '../../adapters/express'
import { createIdempotency, createMemoryStore } from '../../src'

let server: Server | undefined
afterEach(
  () =>
    new Promise<void>((resolve) => {
      server?.closeAllConnections()
      server?.close(() => resolve()) ?? resolve()
    }),
)

/** An Express app with the middleware app-wide (no body parser unless given) on a real server. */
async function serve(routes: (app: express.Express) => void, parser?: express.RequestHandler) {
  const store = createMemoryStore()
  const app = express()
  if (parser) app.use(parser)
  app.use(idempotency({ idempotency: createIdempotency({ store }) }))
  routes(app)
  server = createServer(app)
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve))
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return { base, store }
}

describe('the Express middleware on routes written for Express', () => {
  it('leaves safe methods, and POSTs without a key, to the routes untouched: streams and flushed headers included', async () => {
    const chunks = vi.fn()
    const { base, store } = await serve((app) => {
      app.put('/upload', (req, res) => {
        let size = 0
        req.on('data', (chunk: Buffer) => {
          size += chunk.length
          chunks()
        })
        req.on('end', () => res.json({ size }))
      })
      app.get('/events', (_req, res) => {
        res.setHeader('content-type', 'text/event-stream')
        res.flushHeaders()
        res.end('data: 1\n\n')
      })
    })
    const claim = vi.spyOn(store, 'claim')
    const upload = await fetch(`${base}/upload`, {
      method: 'PUT',
      headers: { 'idempotency-key': 'k-put' },
      body: 'x'.repeat(10_000),
    })
    expect(await upload.json()).toEqual({ size: 10_000 })
    expect(chunks).toHaveBeenCalled()
    const events = await fetch(`${base}/events`, { headers: { 'idempotency-key': 'k-get' } })
    expect(await events.text()).toBe('data: 1\n\n')
    expect(claim).not.toHaveBeenCalled()
  })

  it('records a route that answers with writeHead and its own headers, and replays them', async () => {
    const { base } = await serve((app) => {
      app.post('/charges', (_req, res) => {
        res.writeHead(201, { 'content-type': 'application/json', 'x-charge': 'ch_1' })
        res.end('{"id":"ch_1"}')
      })
    }, express.json())
    const send = () =>
      fetch(`${base}/charges`, {
        method: 'POST',
        headers: { 'idempotency-key': 'k-head', 'content-type': 'application/json' },
        body: '{"amount":1}',
      })
    const first = await send()
    const retry = await send()
    expect([first.status, retry.status]).toEqual([201, 201])
    expect(retry.headers.get('x-charge')).toBe('ch_1')
    expect(retry.headers.get('content-type')).toBe('application/json')
    expect(retry.headers.get('idempotent-replay')).toBe('true')
    expect(await retry.text()).toBe(await first.text())
  })

  it('does not record a route that wrote part of its body and then failed: the retry runs again', async () => {
    const runs = vi.fn()
    const { base } = await serve((app) => {
      app.post('/partial', (_req, res) => {
        runs()
        res.write('part of it')
        throw new Error('failed mid-body')
      })
    }, express.json())
    const send = () =>
      fetch(`${base}/partial`, { method: 'POST', headers: { 'idempotency-key': 'k-part' } }).then(
        (response) => response.text(),
        (error: Error) => error.message,
      )
    await send()
    const retry = await fetch(`${base}/partial`, {
      method: 'POST',
      headers: { 'idempotency-key': 'k-part' },
    }).catch(() => undefined)
    expect(retry?.headers.get('idempotent-replay') ?? null).toBeNull()
    expect(runs).toHaveBeenCalledTimes(2)
  })

  it('survives a route that ends its response twice, and records the first end', async () => {
    const { base } = await serve((app) => {
      app.post('/twice', (_req, res) => {
        res.status(200).send('once')
        res.end('twice')
      })
    }, express.json())
    const send = () =>
      fetch(`${base}/twice`, { method: 'POST', headers: { 'idempotency-key': 'k-twice' } })
    expect(await (await send()).text()).toBe('once')
    const retry = await send()
    expect(await retry.text()).toBe('once')
    expect(retry.headers.get('idempotent-replay')).toBe('true')
  })
})
