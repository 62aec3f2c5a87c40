import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { serve } from '@hono/node-server'
import express from 'express'
import { Hono } from 'hono'
import { vi } from 'vitest'
import { idempotency as expressIdempotency } from '../../adapters/express'
import { sendFetchResponse, toFetchRequest } from '../../adapters/express/node'
import { withIdempotency } from '../../adapters/fetch'
import { idempotency as honoIdempotency } from '../../adapters/hono'
import type { HttpIdempotencyOptions } from '../../adapters/http'
import {
  createIdempotency,
  createMemoryStore,
  type IdempotencyOptions,
  type IdempotencyStore,
} from '../../src'

export interface Gate {
  opened: Promise<void>
  open(): void
}

export function gate(): Gate {
  let open!: () => void
  const opened = new Promise<void>((resolve) => {
    open = resolve
  })
  return { opened, open }
}

/** The business routes every transport serves, as one Fetch handler. */
export function createRoutes() {
  const charges: { key: string | null; amount: unknown }[] = []
  const hold = { gate: undefined as Gate | undefined, arrived: gate() }
  const routes = vi.fn(async (request: Request): Promise<Response> => {
    const { pathname, searchParams } = new URL(request.url)
    const route = `${request.method} ${pathname}`
    if (route === 'POST /payments' || route === 'PATCH /payments') {
      const body = (await request.json()) as { amount?: unknown }
      if (hold.gate) {
        hold.arrived.open()
        await hold.gate.opened
      }
      charges.push({ key: request.headers.get('idempotency-key'), amount: body.amount })
      return Response.json(
        { id: `ch_${charges.length}`, amount: body.amount },
        {
          status: 201,
          headers: { 'x-charge-id': `ch_${charges.length}`, 'set-cookie': 'session=secret' },
        },
      )
    }
    if (route === 'POST /reject') return Response.json({ error: 'card declined' }, { status: 402 })
    if (route === 'POST /busy') return new Response('try later', { status: 503 })
    if (route === 'POST /conflict') return new Response('conflict', { status: 409 })
    if (route === 'POST /throw') throw new Error('the handler failed')
    if (route === 'POST /binary') {
      const bytes = new Uint8Array(256).map((_, i) => i)
      return new Response(bytes, { headers: { 'content-type': 'application/octet-stream' } })
    }
    if (route === 'POST /stream') return streamed(Number(searchParams.get('size') ?? 0))
    if (route === 'POST /empty') return new Response(null, { status: 204 })
    return new Response(`${request.method} ${pathname} passed through`, { status: 200 })
  })
  return { routes, charges, hold }
}

/** `size` bytes (each its index mod 251) in chunks of 1 KiB. */
function streamed(size: number): Response {
  let sent = 0
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (sent >= size) return controller.close()
      const chunk = new Uint8Array(Math.min(1024, size - sent)).map((_, i) => (sent + i) % 251)
      sent += chunk.length
      controller.enqueue(chunk)
    },
  })
  return new Response(body, { headers: { 'content-type': 'application/octet-stream' } })
}

export type Transport = 'fetch' | 'fetch on Node' | 'hono' | 'hono on Node' | 'express on Node'
export const transports: Transport[] = [
  'fetch',
  'fetch on Node',
  'hono',
  'hono on Node',
  'express on Node',
]

export interface HttpAppOptions {
  store?: IdempotencyStore
  engine?: Partial<IdempotencyOptions>
  adapter?: Partial<HttpIdempotencyOptions>
}

/**
 * The routes behind one of the adapters: the fetch wrapper (called directly, or served by Node)
 * or the Hono middleware (`app.request`, or served by Node). `send(path, init)` makes a request.
 */
export async function createHttpApp(transport: Transport, options: HttpAppOptions = {}) {
  const store = options.store ?? createMemoryStore()
  const engine = createIdempotency({ store, ...options.engine })
  const { routes, charges, hold } = createRoutes()
  const adapterOptions = {
    idempotency: engine,
    scope: (request: Request) => request.headers.get('x-tenant'),
    ...options.adapter,
  }
  let fetchHandler: (request: Request) => Promise<Response>
  if (transport === 'express on Node')
    return expressApp(routes, adapterOptions, { charges, hold, store, engine, routes })
  if (transport.startsWith('fetch')) {
    fetchHandler = withIdempotency(routes, adapterOptions)
  } else {
    const app = new Hono()
    app.use('*', honoIdempotency(adapterOptions))
    app.all('*', (c) => routes(c.req.raw))
    fetchHandler = async (request) => app.fetch(request)
  }
  let base = 'http://app.test'
  let close = async () => {}
  if (transport.endsWith('on Node')) {
    const server = serve({ fetch: fetchHandler, port: 0, hostname: '127.0.0.1' })
    await new Promise<void>((resolve) => server.once('listening', resolve))
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    close = () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
  const send = (path: string, init: SendInit = {}) => {
    const request = requestTo(base, path, init)
    return base.startsWith('http://app.test') ? fetchHandler(request) : fetch(request)
  }
  return { send, routes, charges, hold, store, engine, close }
}

/** A request's options, with the key and the tenant as headers. */
export type SendInit = RequestInit & { key?: string; tenant?: string }

/** A POST (unless `init` says otherwise) to `base + path`, the key and tenant as headers. */
function requestTo(base: string, path: string, init: SendInit): Request {
  const headers = new Headers(init.headers)
  if (init.key !== undefined) headers.set('idempotency-key', init.key)
  if (init.tenant !== undefined) headers.set('x-tenant', init.tenant)
  return new Request(`${base}${path}`, { method: 'POST', ...init, headers })
}

/**
 * The routes behind the Express middleware, after `express.json()`, on a real server. The
 * routes answer through Express's `res` (status, headers, writes), as Express handlers do.
 */
async function expressApp<T extends object>(
  routes: (request: Request) => Promise<Response>,
  adapterOptions: HttpIdempotencyOptions,
  rest: T,
) {
  const app = express()
  app.use(express.json())
  app.use(expressIdempotency(adapterOptions))
  app.use(async (req, res) => {
    await sendFetchResponse(res, await routes(await toFetchRequest(req)))
  })
  const server = createServer(app)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const send = (path: string, init: SendInit = {}) => fetch(requestTo(base, path, init))
  const close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    })
  return { ...rest, send, close }
}

/** A JSON POST body. */
export function json(value: unknown, init: RequestInit = {}): RequestInit {
  return {
    ...init,
    body: JSON.stringify(value),
    headers: { 'content-type': 'application/json', ...(init.headers as object) },
  }
}
