import { TRPCError } from '@trpc/server'
import { replayError } from './errors'

/**
 * Streamed outputs of tRPC mutations (`httpBatchStreamLink`, the jsonl response): an async
 * iterable, or a plain object with promises or async iterables as members, at any level the
 * stream reaches (what a promise resolves to, what an iterable yields). tRPC reads them after the
 * middleware has returned, so the middleware hands tRPC wrapped copies that write down what tRPC
 * reads (stream-record.ts), and settles the lease when the last of them is read: a record is
 * never made of a stream half read, and never of `{}`.
 *
 * The predicates below are tRPC's own (`isObject`, `isPromise`, `isAsyncIterable`, the
 * `is-plain-object` its jsonl producer vendors, and `isDataStream`), so the parts recorded are
 * exactly the parts tRPC streams.
 */

/** Marks the recorded form of a streamed output (and escapes a plain value that has the key). */
export const streamTag = 'idempotent-mutations:stream'

const isObject = (value: unknown): value is Record<string, unknown> =>
  !!value && typeof value === 'object' && !Array.isArray(value)

export const isPromise = (value: unknown): value is Promise<unknown> =>
  (isObject(value) || typeof value === 'function') &&
  typeof (value as { then?: unknown }).then === 'function' &&
  typeof (value as { catch?: unknown }).catch === 'function'

export const isAsyncIterable = (value: unknown): value is AsyncIterable<unknown> =>
  isObject(value) && Symbol.asyncIterator in value

export const isDeferred = (value: unknown) => isPromise(value) || isAsyncIterable(value)

const isObjectTag = (value: unknown) => Object.prototype.toString.call(value) === '[object Object]'

/**
 * tRPC's vendored `is-plain-object` (constructor-based): `Object.create(base)` is plain, an
 * object whose own `constructor` is a string is not. It may throw (a proxy, a getter), as tRPC's.
 */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (!isObjectTag(value)) return false
  const maker = (value as { constructor?: unknown }).constructor
  if (maker === undefined) return true
  const prototype = (maker as { prototype?: unknown }).prototype
  if (!isObjectTag(prototype)) return false
  // biome-ignore lint/suspicious/noPrototypeBuiltins: tRPC's own call, throwing where it throws
  return (prototype as { hasOwnProperty(name: string): boolean }).hasOwnProperty('isPrototypeOf')
}

/** Whether an own enumerable member of `value` is a promise or an async iterable. */
export function hasDeferredMember(value: object): boolean {
  for (const item of Object.values(value)) {
    // Most members are primitives: `typeof` turns them away before the costlier checks.
    if ((typeof item === 'object' && item !== null) || typeof item === 'function') {
      if (isDeferred(item)) return true
    }
  }
  return false
}

/**
 * tRPC's `isDataStream`: an object that is an async iterable or has a promise or async iterable
 * as an own member. On a request that is not streamed (`httpLink`, `httpBatchLink`) tRPC refuses
 * such an output with 415 without reading it; on every keyed first execution, it tells the
 * outputs that stream nothing apart without reading the request. A getter that throws answers
 * false: the output is then recorded as any other (and found unreadable).
 */
export function isDataStream(data: unknown): boolean {
  if (!isObject(data)) return false
  try {
    return Symbol.asyncIterator in data || hasDeferredMember(data)
  } catch {
    return false
  }
}

/** True when tRPC would stream parts of `data` over `httpBatchStreamLink`. */
export function isStreamed(data: unknown): boolean {
  try {
    return isDeferred(data) || (isPlainObject(data) && hasDeferredMember(data))
  } catch {
    return false
  }
}

/** The procedure paths a tRPC URL names: its last segment, comma-separated in a batch. */
function urlProcedurePaths(url: string): string[] | undefined {
  try {
    const { pathname } = new URL(url, 'http://localhost')
    return decodeURIComponent(pathname.slice(pathname.lastIndexOf('/') + 1)).split(',')
  } catch {
    return undefined
  }
}

/**
 * Whether tRPC answers this call with a stream: a batch (`batch=1`) asking for jsonl (the
 * `trpc-accept` or `accept` header). Undefined when the context holds no request of this call:
 * `createCaller`, where the caller itself reads what the procedure returns, also when its
 * context carries the application's own request (a Next.js server action), which is told apart
 * by a URL that does not name the procedure.
 */
export function streamsResponse(ctx: unknown, path: string): boolean | undefined {
  const req = (ctx as { req?: { headers?: unknown; url?: unknown } } | null | undefined)?.req
  if (req === null || typeof req !== 'object' || typeof req.url !== 'string') return undefined
  if (!urlProcedurePaths(req.url)?.includes(path)) return undefined
  const header = (name: string): string | undefined => {
    const { headers } = req
    if (headers instanceof Headers) return headers.get(name) ?? undefined
    const value = (headers as Record<string, unknown> | undefined)?.[name]
    return typeof value === 'string' ? value : undefined
  }
  const accept = header('trpc-accept') ?? header('accept') ?? ''
  const jsonl = accept.split(',').some((type) => type.trim() === 'application/jsonl')
  return jsonl && new URL(req.url, 'http://localhost').searchParams.get('batch') === '1'
}

/** What tRPC itself answers for a streamed output on a request that is not streamed. */
export const unstreamedRefusal = () =>
  new TRPCError({
    code: 'UNSUPPORTED_MEDIA_TYPE',
    message: 'Cannot use stream-like response in non-streaming request - use httpBatchStreamLink',
  })

/** A value as recorded: as it is, unless it is a plain object with the tag's key (escaped). */
export function recordablePlain(data: unknown): unknown {
  return isObject(data) && Object.hasOwn(data, streamTag)
    ? { [streamTag]: 'plain', value: data }
    : data
}

/** The output a replay returns: the recorded value, with a recorded stream made a stream again. */
export function replayable(recorded: unknown): unknown {
  if (!isObject(recorded) || !Object.hasOwn(recorded, streamTag)) return recorded
  if (recorded[streamTag] === 'plain') return recorded.value
  if (recorded[streamTag] === 'stream') {
    return replayPart(recorded.value, new ReplayOrder())
  }
  return recorded
}

/**
 * The recorded form of a stream's parts. Each settled part carries its place (`order`) in the
 * order the first response's parts settled, so a replay streams its chunks in that order.
 */
export interface PromiseSlot {
  [streamTag]: 'promise'
  value?: unknown
  error?: unknown
  order?: number
}

export interface IterableSlot {
  [streamTag]: 'iterable'
  items: unknown[]
  /** The place of each item, then of the end (return or error). */
  orders?: number[]
  returned?: unknown
  error?: unknown
}

/** A plain object with streamed members, recorded member by member. */
export interface ObjectSlot {
  [streamTag]: 'object'
  value: Record<string, unknown>
}

/**
 * Hands the replayed parts to tRPC one at a time, in their recorded order: each waits for the one
 * before it to be handed over, and a macrotask more, by when tRPC has queued its chunk.
 */
class ReplayOrder {
  #next = 0
  #waiting = new Map<number, () => void>()

  async turn(order: number | undefined): Promise<void> {
    if (order === undefined || order <= this.#next) return
    await new Promise<void>((resolve) => this.#waiting.set(order, resolve))
  }

  done(order: number | undefined): void {
    if (order === undefined) return
    setImmediate(() => {
      this.#next = Math.max(this.#next, order + 1)
      const wake = this.#waiting.get(this.#next)
      this.#waiting.delete(this.#next)
      wake?.()
    })
  }
}

/** A recorded part as tRPC reads it on a replay: the same values, streamed again. */
function replayPart(recorded: unknown, order: ReplayOrder): unknown {
  if (!isObject(recorded) || !Object.hasOwn(recorded, streamTag)) return recorded
  switch (recorded[streamTag]) {
    case 'plain':
      return recorded.value
    case 'object': {
      const { value } = recorded as unknown as ObjectSlot
      return Object.fromEntries(
        Object.entries(value).map(([name, item]) => [name, replayPart(item, order)] as const),
      )
    }
    case 'promise':
      return replayPromise(recorded as unknown as PromiseSlot, order)
    case 'iterable':
      return replayIterable(recorded as unknown as IterableSlot, order)
    default:
      return recorded
  }
}

function replayPromise(slot: PromiseSlot, order: ReplayOrder): Promise<unknown> {
  const replayed = order.turn(slot.order).then(() => {
    order.done(slot.order)
    if (slot.error === undefined) return replayPart(slot.value, order)
    throw replayError(slot.error)
  })
  // Read by tRPC a moment later: not an unhandled rejection meanwhile.
  replayed.catch(() => {})
  return replayed
}

async function* replayIterable(
  slot: IterableSlot,
  order: ReplayOrder,
): AsyncGenerator<unknown, unknown> {
  for (const [index, item] of slot.items.entries()) {
    await order.turn(slot.orders?.[index])
    order.done(slot.orders?.[index])
    yield replayPart(item, order)
  }
  const end = slot.orders?.[slot.items.length]
  await order.turn(end)
  order.done(end)
  if (slot.error !== undefined) throw replayError(slot.error)
  return replayPart(slot.returned, order)
}
