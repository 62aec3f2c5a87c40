import { initTRPC } from '@trpc/server'
import { fetchRequestHandler } from '@trpc/server/adapters/fetch'
import superjson from 'superjson'
import { describe, expect, it } from 'vitest'
import { createIdempotencyMiddleware } from '../../adapters/trpc'
import { createIdempotency, createMemoryStore, type IdempotencyEventType } from '../../src'

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const tag = 'idempotent-mutations:stream'

/** A tRPC app whose keyed mutation `out` returns what `make()` returns, served in process. */
function streamApp(make: () => unknown, options: { superjson?: boolean } = {}) {
  const store = createMemoryStore()
  const events: IdempotencyEventType[] = []
  const waiting: { type: IdempotencyEventType; resolve: () => void }[] = []
  const idempotency = createIdempotency({
    store,
    logger: { warn() {}, error() {} },
    onEvent: (event) => {
      events.push(event.type)
      for (const wait of waiting.filter((w) => w.type === event.type)) {
        waiting.splice(waiting.indexOf(wait), 1)
        wait.resolve()
      }
    },
  })
  const t = initTRPC.create({
    isDev: false,
    ...(options.superjson ? { transformer: superjson } : {}),
  })
  const procedure = t.procedure.use(createIdempotencyMiddleware({ idempotency, root: t }))
  let runs = 0
  const router = t.router({
    out: procedure.mutation(() => {
      runs++
      return make()
    }),
  })
  const input = options.superjson ? '{"json":{}}' : '{}'
  /** One jsonl call (`paths` such as `out` or `out,out`), as bytes; `cancel` hangs up early. */
  async function call(key: string, paths = 'out', cancel?: (text: string) => boolean) {
    const abort = new AbortController()
    const count = paths.split(',').length
    const body = JSON.stringify(
      Object.fromEntries(Array.from({ length: count }, (_, i) => [i, JSON.parse(input)])),
    )
    const response = await fetchRequestHandler({
      endpoint: '/trpc',
      router,
      req: new Request(`http://trpc.test/trpc/${paths}?batch=1`, {
        method: 'POST',
        signal: abort.signal,
        headers: {
          'content-type': 'application/json',
          'trpc-accept': 'application/jsonl',
          'idempotency-key': key,
        },
        body,
      }),
      createContext: ({ req, resHeaders }) => ({ req, resHeaders }),
    })
    const reader = (response.body as ReadableStream<Uint8Array>).getReader()
    let text = ''
    for (;;) {
      const chunk = await reader.read()
      if (chunk.done) break
      text += new TextDecoder().decode(chunk.value)
      if (cancel?.(text)) {
        await reader.cancel()
        abort.abort()
        break
      }
    }
    return text
  }
  const next = (type: IdempotencyEventType) =>
    new Promise<void>((resolve) => waiting.push({ type, resolve }))
  const record = (key: string) => store.get(JSON.stringify(['', 'out']), key)
  return { call, next, events, record, runs: () => runs, router, t, idempotency }
}

describe('streamed outputs: edge cases', () => {
  it('releases the key when the client hangs up while a promise is still pending', async () => {
    const app = streamApp(() => ({
      head: 1,
      tail: sleep(50).then(() =>
        (async function* () {
          yield 1
          yield 2
        })(),
      ),
    }))
    const released = app.next('released')
    await app.call('k-abort', 'out', (text) => text.length > 0)
    await released
    expect(await app.record('k-abort')).toBeUndefined()
    const executed = app.next('executed')
    const retry = await app.call('k-abort')
    await executed
    expect(retry).toContain('[[2]]')
    expect(app.runs()).toBe(2)
  })

  it('releases the key when what a promise resolves to throws as it is read', async () => {
    const app = streamApp(() => ({
      x: sleep(5).then(() => ({
        get bad(): never {
          throw new Error('getter')
        },
      })),
    }))
    const released = app.next('released')
    await app.call('k-getter')
    await released
    expect(await app.record('k-getter')).toBeUndefined()
  })

  it.each([
    [
      'an object of another prototype',
      () =>
        Object.assign(Object.create({ kind: 'order' }), { receipt: Promise.resolve({ n: 42 }) }),
    ],
    [
      'an object with an own `constructor`',
      () => ({
        constructor: 'x',
        rows: (async function* () {
          yield 1
        })(),
      }),
    ],
  ])('streams and records %s exactly as tRPC treats it', async (name, make) => {
    const app = streamApp(make)
    const key = `k-${name.length}`
    const settled = Promise.race([app.next('executed'), app.next('released')])
    const first = await app.call(key)
    await settled
    const retry = await app.call(key)
    // An own `constructor` is not streamed, and superjson refuses to record it.
    if (!retry.includes('could not be stored')) expect(retry).toBe(first)
    expect(retry).not.toContain('INTERNAL_SERVER_ERROR')
    expect(app.runs()).toBe(1)
  })

  it('replays a second call of the same key in one stream batch, after the first is read', async () => {
    const app = streamApp(async function* () {
      yield 1
      await sleep(20)
      yield 2
    })
    const text = await app.call('k-batch', 'out,out')
    expect(text).not.toContain('CONFLICT')
    expect(text.match(/\[\d,1,\[\[2\]\]\]/g)).toHaveLength(2)
    expect(app.runs()).toBe(1)
  })

  it.each([false, true])(
    'replays chunks in the order they first settled (superjson: %s)',
    async (withSuperjson) => {
      const app = streamApp(
        () => ({
          slow: sleep(30).then(() => 'slow-value'),
          fast: Promise.resolve('fast-value'),
          rows: (async function* () {
            yield 'a'
            await sleep(10)
            yield 'b'
            return sleep(30).then(() => 'never mind')
          })(),
        }),
        { superjson: withSuperjson },
      )
      const executed = app.next('executed')
      const first = await app.call('k-order')
      await executed
      expect(first.indexOf('fast-value')).toBeLessThan(first.indexOf('slow-value'))
      expect(await app.call('k-order')).toBe(first)
    },
  )

  it.each([
    ['a plain member', () => ({ p: Promise.resolve(1), note: { [tag]: 'promise', value: 'x' } })],
    [
      'a nested plain member',
      () => ({ p: Promise.resolve(1), note: { deep: { [tag]: 'iterable', items: [1] } } }),
    ],
    ['a resolved value', () => ({ p: Promise.resolve({ [tag]: 'iterable', items: [1, 2] }) })],
    [
      'a nested resolved value',
      () => ({
        p: Promise.resolve({
          a: { [tag]: 'promise', value: 1 },
          q: Promise.resolve({ [tag]: 'plain', value: 2 }),
        }),
      }),
    ],
    [
      'a yielded item',
      () =>
        (async function* () {
          yield { [tag]: 'promise', value: { a: 1 } }
        })(),
    ],
  ])('replays %s that uses the marker key as it is', async (name, make) => {
    const app = streamApp(make)
    const key = `k-${name.length}`
    const executed = app.next('executed')
    const first = await app.call(key)
    await executed
    expect(await app.call(key)).toBe(first)
  })

  it('replays a promise or item resolving to a function or a symbol as the null tRPC sent', async () => {
    const app = streamApp(() => ({
      fn: Promise.resolve(() => 1),
      symbol: Promise.resolve(Symbol('q')),
      rows: (async function* () {
        yield () => 2
        return Symbol('end')
      })(),
    }))
    const executed = app.next('executed')
    const first = await app.call('k-fn')
    await executed
    expect(first).toContain('[[null]]')
    expect(await app.call('k-fn')).toBe(first)
  })
})

describe('createCaller contexts', () => {
  it("streams to a caller whose context carries the application's own request", async () => {
    const store = createMemoryStore()
    const idempotency = createIdempotency({ store, logger: { warn() {}, error() {} } })
    const t = initTRPC.context<{ req?: Request }>().create()
    const procedure = t.procedure.use(
      createIdempotencyMiddleware({ idempotency, root: t, getKey: () => 'k' }),
    )
    let runs = 0
    const router = t.router({
      rows: procedure.mutation(async function* () {
        runs++
        yield 1
        yield 2
      }),
    })
    const caller = t.createCallerFactory(router)({
      req: new Request('http://app.test/orders', { method: 'POST' }),
    })
    const read = async () => {
      const rows: unknown[] = []
      for await (const row of (await caller.rows()) as AsyncIterable<unknown>) rows.push(row)
      return rows
    }
    expect(await read()).toEqual([1, 2])
    await sleep(10)
    expect(await read()).toEqual([1, 2])
    expect(runs).toBe(1)
  })
})
