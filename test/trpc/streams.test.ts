import { TRPCError } from '@trpc/server'
import { afterEach, describe, expect, it } from 'vitest'
import type { IdempotencyEvent, IdempotencyEventType } from '../../src'
import { createTRPCEcho } from '../support/echo-servers'
import { type App, createApp, deferred, type LinkKind, serve, settle } from './fixtures'

/** The engine's events, and a promise for the next one of a type (a readiness signal). */
function watchEvents() {
  const seen: IdempotencyEvent[] = []
  const waiting: { type: IdempotencyEventType; resolve: () => void }[] = []
  return {
    seen,
    onEvent(event: IdempotencyEvent) {
      seen.push(event)
      for (const wait of waiting.filter((w) => w.type === event.type)) {
        waiting.splice(waiting.indexOf(wait), 1)
        wait.resolve()
      }
    },
    next(type: IdempotencyEventType): Promise<void> {
      const signal = deferred()
      waiting.push({ type, resolve: () => signal.resolve() })
      return signal.promise
    },
  }
}

type Served = Awaited<ReturnType<typeof serve>>

const servers = [
  { transport: 'fetch', superjson: false },
  { transport: 'fetch', superjson: true },
  { transport: 'standalone', superjson: false },
  { transport: 'standalone', superjson: true },
] as const

describe.each(servers)(
  'streamed tRPC mutations ($transport, superjson: $superjson)',
  ({ transport, superjson }) => {
    let app: App
    let server: Served
    let events: ReturnType<typeof watchEvents>
    const start = async (link: LinkKind = 'batch-stream') => {
      events = watchEvents()
      app = createApp({ superjson, engine: { onEvent: (event) => events.onEvent(event) } })
      server = await serve(app, transport, link)
    }
    afterEach(() => server.close())

    /** One call as `httpBatchStreamLink` sends it, answered as bytes. */
    async function streamed(path: string, key: string, name = 'abc') {
      const input = superjson ? { json: { name } } : { name }
      const response = await server.fetch(`${server.url}/${path}?batch=1`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'trpc-accept': 'application/jsonl',
          'idempotency-key': key,
        },
        body: JSON.stringify({ 0: input }),
      })
      return { status: response.status, body: await response.text() }
    }

    /** The call as the first caller makes it, once its lease has settled. */
    async function first(path: string, key: string, settledAs: IdempotencyEventType = 'executed') {
      const settled = events.next(settledAs)
      const answer = await streamed(path, key)
      await settled
      return answer
    }

    it('records a streamed output once it is read whole, and a retry gets the same stream byte for byte', async () => {
      await start()
      const original = await first('order.rows', 'k-rows')
      expect(original.body).toContain('"row":2')
      const replay = await streamed('order.rows', 'k-rows')
      expect(replay).toEqual(original)
      expect(app.streams.rows).toHaveBeenCalledTimes(1)
    })

    it('replays the stream to a real client as the same values', async () => {
      await start()
      const read = async () => {
        const rows: unknown[] = []
        const stream = await server.client.order.rows.mutate(
          { name: 'abc' },
          { context: { key: 'k-c' } },
        )
        for await (const row of stream as AsyncIterable<unknown>) rows.push(row)
        return rows
      }
      const executed = events.next('executed')
      const rows = await read()
      await executed
      expect(await read()).toEqual(rows)
      expect(rows).toHaveLength(2)
      expect(app.streams.rows).toHaveBeenCalledTimes(1)
    })

    it('records promises and iterables inside an output once resolved, and replays them resolved to the same values', async () => {
      await start()
      const original = await first('order.deferred', 'k-deferred')
      expect(original.body).toContain('receipt-abc')
      expect(original.body).toContain('paid')
      expect(await streamed('order.deferred', 'k-deferred')).toEqual(original)
      expect(app.streams.deferred).toHaveBeenCalledTimes(1)
    })

    it('releases the key on an unexpected failure part-way, so the retry runs again', async () => {
      await start()
      app.failNextStream(new Error('the database went away'))
      const broken = await first('order.rows', 'k-fail', 'released')
      expect(broken.body).not.toContain('"row":2')
      const retry = await first('order.rows', 'k-fail')
      expect(retry.body).toContain('"row":2')
      expect(app.streams.rows).toHaveBeenCalledTimes(2)
    })

    it('records a deterministic error part-way: the retry gets the same rows and the same error', async () => {
      await start()
      app.failNextStream(new TRPCError({ code: 'BAD_REQUEST', message: 'no more rows for abc' }))
      const original = await first('order.rows', 'k-error')
      expect(original.body).toContain('no more rows for abc')
      expect(await streamed('order.rows', 'k-error')).toEqual(original)
      expect(app.streams.rows).toHaveBeenCalledTimes(1)
    })

    // Through the fetch adapter, a cancelled response stops tRPC reading the procedure's stream.
    // The Node adapter reads on to the end after the client hangs up: the stream is then read
    // whole, and recorded like any other.
    it.runIf(transport === 'fetch')(
      'releases the key when the reader stops early, rather than recording part of the stream',
      async () => {
        await start()
        const released = events.next('released')
        const input = superjson ? { json: { name: 'abc' } } : { name: 'abc' }
        const response = await server.fetch(`${server.url}/order.held?batch=1`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'trpc-accept': 'application/jsonl',
            'idempotency-key': 'k-stop',
          },
          body: JSON.stringify({ 0: input }),
        })
        // Read up to the first row, then hang up: tRPC stops reading the procedure's stream.
        const reader = (response.body as ReadableStream<Uint8Array>).getReader()
        let text = ''
        while (!text.includes('"row":1'))
          text += new TextDecoder().decode((await reader.read()).value)
        await reader.cancel()
        // tRPC ends its reading once the pending row arrives (a generator cannot stop mid-await).
        app.openStreamGate()
        await released
        expect(events.seen.map((event) => event.type)).not.toContain('executed')
        expect(await app.store.get(JSON.stringify(['', 'order.held']), 'k-stop')).toBeUndefined()
        const retry = await first('order.held', 'k-stop')
        expect(retry.body).toContain('"row":2')
        expect(app.streams.held).toHaveBeenCalledTimes(2)
      },
    )

    it.each(['http', 'batch'] as const)(
      'over a link that does not stream (%s), a retry gets the same 415 and the mutation runs once',
      async (link) => {
        await start(link)
        const call = () =>
          settle(server.client.order.rows.mutate({ name: 'abc' }, { context: { key: 'k-415' } }))
        const original = await call()
        expect(original).toMatchObject({ ok: false, data: { code: 'UNSUPPORTED_MEDIA_TYPE' } })
        expect(await call()).toEqual(original)
        expect(server.responses.map((response) => [response.status, response.replay])).toEqual([
          [415, null],
          [415, 'true'],
        ])
        expect(app.streams.rows).toHaveBeenCalledTimes(1)
      },
    )
  },
)

describe('the recorded form of a streamed output', () => {
  it('is never confused with a plain output that uses its marker key', async () => {
    const app = createTRPCEcho({ superjson: false })
    // Shaped exactly like a recorded stream: replayed as one, it would answer 415 here.
    const marker = 'idempotent-mutations:stream'
    app.state.output = { [marker]: 'stream', value: { [marker]: 'iterable', items: [1, 2] } }
    const first = await app.call('k-marker')
    const retry = await app.call('k-marker')
    expect(first.body).toContain('"idempotent-mutations:stream":"stream"')
    expect(retry).toEqual({ ...first, replay: 'true' })
    expect(app.echo).toHaveBeenCalledTimes(1)
  })
})
