import { vi } from 'vitest'

/** One scripted answer: a response, a connection failure, or a function of the request. */
export type Step = Response | 'network' | ((request: Request) => Response | Promise<Response>)

/**
 * A fake `fetch` that answers from a script, one step per call, and records every request it
 * got (as a `Request`, so tests read headers and bodies the way a server would).
 */
export function scriptedFetch(steps: Step[]) {
  const requests: Request[] = []
  const fetch = vi.fn(async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const request = new Request(input, init)
    requests.push(request)
    const step = steps.shift()
    if (step === undefined) throw new Error(`scriptedFetch: unexpected call ${requests.length}`)
    if (step === 'network') throw new TypeError('fetch failed')
    return typeof step === 'function' ? step(request) : step
  })
  return {
    fetch,
    requests,
    keys: () => requests.map((r) => r.headers.get('idempotency-key')),
    bodies: () => Promise.all(requests.map((r) => r.clone().text())),
  }
}

/** A `sleep` that returns at once and records each delay, so backoff costs no time. */
export function recordingSleep() {
  const delays: number[] = []
  const sleep = async (ms: number, signal: AbortSignal | undefined) => {
    delays.push(ms)
    signal?.throwIfAborted()
  }
  return { delays, sleep }
}

export function json(status: number, body: unknown, headers: Record<string, string> = {}) {
  return new Response(JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/json', ...headers },
  })
}

/** A 200 response whose body breaks off mid-read: the server answered, the client lost it. */
export function cutOffResponse() {
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(new TextEncoder().encode('{"data":{"creat'))
      controller.error(new TypeError('terminated'))
    },
  })
  return new Response(stream, { status: 200, headers: { 'content-type': 'application/json' } })
}

export const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

export function silentLogger() {
  return { warn: vi.fn(), error: vi.fn() }
}
