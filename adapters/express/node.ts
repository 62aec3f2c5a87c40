import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http'

/** Node's request as Express (or a body parser before the middleware) leaves it. */
export type NodeRequest = IncomingMessage & {
  body?: unknown
  originalUrl?: string
  protocol?: string
  /** body-parser's mark that the body has been read. */
  _body?: boolean
}

/** Node's response, with Express's `locals` when it is there. */
export type NodeResponse = ServerResponse & { locals?: Record<string, unknown> }

const nullBodyStatuses = new Set([101, 103, 204, 205, 304])

/**
 * `req` as a Fetch `Request` with the same method, URL, headers and body bytes. A body that a
 * parser already read (`req.body`) is taken from there; otherwise the stream is read here and
 * left in `req.body` as a Buffer (marked read, so a parser after this middleware skips it).
 */
export async function toFetchRequest(req: NodeRequest): Promise<Request> {
  const protocol = req.protocol ?? 'http'
  const url = `${protocol}://${req.headers.host ?? 'localhost'}${req.originalUrl ?? req.url ?? '/'}`
  const headers = new Headers()
  for (const [name, value] of Object.entries(req.headers)) {
    if (Array.isArray(value)) for (const item of value) headers.append(name, item)
    else if (value !== undefined) headers.set(name, value)
  }
  const method = req.method ?? 'GET'
  if (method === 'GET' || method === 'HEAD') return new Request(url, { method, headers })
  return new Request(url, { method, headers, body: await bodyBytes(req) })
}

async function bodyBytes(req: NodeRequest): Promise<Uint8Array<ArrayBuffer> | null> {
  const { body } = req
  if (Buffer.isBuffer(body)) return new Uint8Array(body)
  if (typeof body === 'string') return new Uint8Array(Buffer.from(body))
  // Parsed by a body parser that read the stream (express.json(), express.urlencoded()): its
  // value, as JSON. A `req.body` set without reading the stream (body-parser 1 for a type it
  // does not parse, `req.body ||= {}`) does not stand for the body: the stream is read here.
  const read = req.readableEnded || req._body === true
  if (read && body !== undefined && body !== null) {
    return new Uint8Array(Buffer.from(JSON.stringify(body)))
  }
  if (read) return null
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk))
  const bytes = Buffer.concat(chunks)
  req.body = bytes
  req._body = true
  return bytes.length === 0 ? null : new Uint8Array(bytes)
}

/**
 * Holds what the rest of the Express stack writes to `res` instead of sending it, and hands it
 * over as a Fetch `Response` (status and headers as they stand at the first write). `writer`
 * sends through the methods it held back (the stack may still be writing into the capture, when
 * a long body streams through); `restore()` puts them back once the answer is sent.
 */
export function captureResponse(res: NodeResponse): {
  response: Promise<Response>
  writer: ResponseWriter
  restore(): void
} {
  const { write, end, writeHead, flushHeaders } = res
  let controller!: ReadableStreamDefaultController<Uint8Array>
  const body = new ReadableStream<Uint8Array>({
    start: (c) => {
      controller = c
    },
  })
  let resolve!: (response: Response) => void
  const response = new Promise<Response>((r) => {
    resolve = r
  })
  let started = false
  let ended = false
  const start = () => {
    if (started) return
    started = true
    const status = res.statusCode
    const init = { status, statusText: res.statusMessage, headers: toHeaders(res.getHeaders()) }
    resolve(new Response(nullBodyStatuses.has(status) ? null : body, init))
  }
  const later = (callback: unknown) => {
    if (typeof callback === 'function') queueMicrotask(() => callback())
  }
  // While captured, the stack sees its headers as sent once it has written (so an error handler
  // after a partial write drops the connection instead of appending a page to the body).
  Object.defineProperty(res, 'headersSent', { configurable: true, get: () => started })
  res.writeHead = heldWriteHead(res)
  res.flushHeaders = () => {}
  res.write = ((chunk: unknown, encoding?: unknown, callback?: unknown) => {
    if (ended) return false
    start()
    controller.enqueue(chunkOf(chunk, encoding))
    later(typeof encoding === 'function' ? encoding : callback)
    return true
  }) as typeof res.write
  res.end = ((chunk?: unknown, encoding?: unknown, callback?: unknown) => {
    if (ended) return res
    start()
    if (chunk !== undefined && chunk !== null && typeof chunk !== 'function') {
      controller.enqueue(chunkOf(chunk, encoding))
    }
    ended = true
    controller.close()
    later([chunk, encoding, callback].find((item) => typeof item === 'function'))
    return res
  }) as typeof res.end
  // The client going away (its end of the connection ended or reset) does not end the
  // operation: the route runs on (a charge it makes is made), and what it answers is recorded
  // for the retry, which replays it instead of charging again; nothing is sent, as
  // `sendFetchResponse` finds the connection gone. A route that never answers then keeps its key
  // in progress until the lease ends. A connection closed from this side before the end (the
  // stack gave up on a response it had begun: Express destroys the socket when a route fails
  // after writing) errors the body, and the key is released.
  const socket = res.socket
  let clientLeft = false
  const onClientLeft = () => {
    clientLeft = true
  }
  socket?.once('end', onClientLeft)
  socket?.once('error', onClientLeft)
  const onClose = () => {
    if (ended || clientLeft) return
    ended = true
    start()
    controller.error(new Error('the connection closed before the response was complete'))
  }
  res.once('close', onClose)
  // Before the answer goes out through the held-back methods, the header machinery is Node's
  // again (its write sends the head through writeHead); the stack's own late writes stay held.
  const unhookHead = () => {
    delete (res as { headersSent?: boolean }).headersSent
    res.writeHead = writeHead
    res.flushHeaders = flushHeaders
  }
  return {
    response,
    writer: {
      write: (chunk) => {
        unhookHead()
        return (write as (chunk: Uint8Array) => boolean).call(res, chunk)
      },
      end: () => {
        unhookHead()
        ;(end as () => void).call(res)
      },
    },
    restore: () => {
      res.off('close', onClose)
      socket?.off('end', onClientLeft)
      socket?.off('error', onClientLeft)
      unhookHead()
      res.write = write
      res.end = end
    },
  }
}

/** A written chunk as bytes, in the encoding it was written with. */
function chunkOf(chunk: unknown, encoding: unknown): Buffer {
  return typeof chunk === 'string'
    ? Buffer.from(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8')
    : Buffer.from(chunk as Uint8Array)
}

/** `res.writeHead` while captured: the status and headers go onto `res`, and nothing is sent. */
function heldWriteHead(res: NodeResponse): NodeResponse['writeHead'] {
  return ((status: number, ...rest: unknown[]) => {
    res.statusCode = status
    const headers = rest.find((item) => item !== null && typeof item === 'object')
    if (typeof rest[0] === 'string') res.statusMessage = rest[0]
    if (Array.isArray(headers)) {
      for (let i = 0; i + 1 < headers.length; i += 2)
        res.setHeader(String(headers[i]), headers[i + 1])
    } else if (headers) {
      for (const [name, value] of Object.entries(headers)) res.setHeader(name, value as string)
    }
    return res
  }) as NodeResponse['writeHead']
}

function toHeaders(headers: OutgoingHttpHeaders): Headers {
  const result = new Headers()
  for (const [name, value] of Object.entries(headers)) {
    if (Array.isArray(value)) for (const item of value) result.append(name, item)
    else if (value !== undefined) result.set(name, String(value))
  }
  return result
}

/** The two `res` methods a response is sent through. */
export interface ResponseWriter {
  write(chunk: Uint8Array): boolean
  end(): void
}

/**
 * Sends `response` through `res`: its status, its headers on top of `res`'s, its body, through
 * `writer` (by default `res`'s own methods; a captured `res` passes the ones it held back).
 */
export async function sendFetchResponse(
  res: NodeResponse,
  response: Response,
  writer: ResponseWriter = { write: (chunk) => res.write(chunk), end: () => res.end() },
): Promise<void> {
  res.statusCode = response.status
  if (response.statusText) res.statusMessage = response.statusText
  const cookies = response.headers.getSetCookie()
  response.headers.forEach((value, name) => {
    if (name !== 'set-cookie') res.setHeader(name, value)
  })
  if (cookies.length > 0) res.setHeader('set-cookie', cookies)
  if (response.body === null) {
    writer.end()
    return
  }
  const reader = response.body.getReader()
  for (let read = await reader.read(); !read.done; read = await reader.read()) {
    if (res.destroyed) {
      await reader.cancel()
      return
    }
    if (!writer.write(read.value)) {
      await new Promise((resolve) => {
        res.once('drain', resolve)
        res.once('close', resolve)
      })
    }
  }
  writer.end()
}
