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

function deferred() {
  let resolve!: () => void
  const promise = new Promise<void>((done) => {
    resolve = done
  })
  return { promise, resolve }
}

describe('the Express middleware when the client hangs up', () => {
  it('records what the route answers after its client went away: the retry replays it and the route ran once', async () => {
    let charged = 0
    const inside = deferred()
    const hungUp = deferred()
    const gate = deferred()
    const executed = deferred()
    const app = express()
    app.use(
      express.json(),
      idempotency({
        idempotency: createIdempotency({
          store: createMemoryStore(),
          onEvent: (event) => {
            if (event.type === 'executed') executed.resolve()
          },
        }),
      }),
    )
    app.post('/charges', async (_req, res) => {
      res.once('close', () => hungUp.resolve())
      inside.resolve()
      await gate.promise
      res.status(201).json({ charge: ++charged })
    })
    server = createServer(app)
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve))
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/charges`
    const send = (signal?: AbortSignal) =>
      fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': 'k-hang-up' },
        body: '{"amount":4200}',
        signal,
      })

    const client = new AbortController()
    const first = send(client.signal).catch((error: Error) => error.name)
    await inside.promise
    client.abort()
    expect(await first).toBe('AbortError')
    await hungUp.promise
    gate.resolve()
    await executed.promise
    const retry = await send()
    expect(retry.status).toBe(201)
    expect(retry.headers.get('idempotent-replay')).toBe('true')
    expect(await retry.json()).toEqual({ charge: 1 })
    expect(charged).toBe(1)
  })
})

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
