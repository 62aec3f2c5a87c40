/**
 * A response as it is recorded: status, headers (less hop-by-hop ones, `Set-Cookie` and the
 * library's own) and the body's bytes in base64 (binary-safe, and plain JSON to the codec, so it
 * takes the codec's fast path). `notStored` marks a response whose body was too large to keep.
 */
export interface RecordedResponse {
  status?: number
  statusText?: string
  headers?: [string, string][]
  /** The body's bytes, base64; null for a response without a body. */
  body?: string | null
  notStored?: true
}

/**
 * Headers a replay does not repeat: hop-by-hop ones (RFC 9110 7.6.1), the length (the replay's
 * own body sets it), `Set-Cookie` (a session a response hands out is not kept in the store) and
 * the library's own.
 */
const unrecordedHeaders = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'content-length',
  'set-cookie',
  'idempotent-replay',
])

/**
 * Reads `response`'s body for the record, up to `maxBytes`. Returns what to record and the
 * response to send: the same status and headers, and the whole body (the bytes read, then the
 * rest of the stream when it was longer than `maxBytes`, in which case nothing is kept).
 */
export async function readForRecord(
  response: Response,
  maxBytes: number,
): Promise<{ recorded: RecordedResponse; response: Response }> {
  const init = {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  }
  if (response.body === null) {
    return { recorded: recordOf(response, null), response }
  }
  const reader = response.body.getReader()
  const chunks: Uint8Array[] = []
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    chunks.push(value)
    size += value.byteLength
    if (size > maxBytes) {
      // Too large to keep: the first caller still gets all of it, read on as it streams.
      return {
        recorded: { notStored: true },
        response: new Response(resumed(chunks, reader), init),
      }
    }
  }
  const bytes = Buffer.concat(chunks)
  return { recorded: recordOf(response, bytes), response: new Response(bytes, init) }
}

function recordOf(response: Response, bytes: Uint8Array | null): RecordedResponse {
  const headers: [string, string][] = []
  response.headers.forEach((value, name) => {
    if (!unrecordedHeaders.has(name)) headers.push([name, value])
  })
  return {
    status: response.status,
    statusText: response.statusText,
    headers,
    body: bytes === null ? null : Buffer.from(bytes).toString('base64'),
  }
}

/** The chunks already read, then the rest of `reader`. */
function resumed(
  chunks: Uint8Array[],
  reader: ReadableStreamDefaultReader<Uint8Array>,
): ReadableStream<Uint8Array> {
  let next = 0
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (next < chunks.length) {
        controller.enqueue(chunks[next++]!)
        return
      }
      const { done, value } = await reader.read()
      if (done) controller.close()
      else controller.enqueue(value)
    },
    cancel: (reason) => reader.cancel(reason),
  })
}

/** The recorded response, as a new `Response` with `Idempotent-Replay: true`. */
export function replayResponse(recorded: RecordedResponse): Response {
  const headers = new Headers(recorded.headers ?? [])
  headers.set('idempotent-replay', 'true')
  const body =
    recorded.body === null || recorded.body === undefined
      ? null
      : Buffer.from(recorded.body, 'base64')
  return new Response(body, {
    status: recorded.status ?? 200,
    statusText: recorded.statusText ?? '',
    headers,
  })
}
