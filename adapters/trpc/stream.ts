import { TRPCError } from '@trpc/server'
import { replayError } from './errors'

/**
 * Streamed outputs of tRPC mutations (`httpBatchStreamLink`, the jsonl response): an async
 * iterable, or a plain object with promises or async iterables as members, at any level the
 * stream reaches (what a promise resolves to, what an iterable yields). tRPC reads them after the
 * middleware has returned, so the middleware hands tRPC wrapped copies that write down what tRPC
 * reads, and settles the lease when the last of them is read: a record is never made of a stream
 * half read, and never of `{}`.
 *
 * The helpers below mirror tRPC's own tests (`isPromise`, `isAsyncIterable`, and the plain-object
 * walk of its jsonl producer), so the parts recorded are exactly the parts tRPC streams.
 */

/** Marks the recorded form of a streamed output (and escapes a plain output that has the key). */
export const streamTag = 'idempotent-mutations:stream'

const isObject = (value: unknown): value is Record<string, unknown> =>
  !!value && typeof value === 'object' && !Array.isArray(value)

const isPromise = (value: unknown): value is Promise<unknown> =>
  (isObject(value) || typeof value === 'function') &&
  typeof (value as { then?: unknown }).then === 'function' &&
  typeof (value as { catch?: unknown }).catch === 'function'

const isAsyncIterable = (value: unknown): value is AsyncIterable<unknown> =>
  isObject(value) && Symbol.asyncIterator in value

const isDeferred = (value: unknown) => isPromise(value) || isAsyncIterable(value)

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (Object.prototype.toString.call(value) !== '[object Object]') return false
  const prototype = Object.getPrototypeOf(value)
  return prototype === Object.prototype || prototype === null
}

function hasDeferredMember(value: Record<string, unknown>): boolean {
  for (const name in value) if (Object.hasOwn(value, name) && isDeferred(value[name])) return true
  return false
}

/**
 * False when tRPC neither streams `data` nor refuses it for not being streamed: an object that is
 * an async iterable or has a promise or async iterable as an own member is all it looks for.
 */
export function mayStream(data: unknown): boolean {
  if (!isObject(data)) return false
  try {
    return Symbol.asyncIterator in data || hasDeferredMember(data)
  } catch {
    return false
  }
}

/**
 * True when tRPC would stream parts of `data` over `httpBatchStreamLink`. A member whose getter
 * throws answers false: such an output is then recorded as any other (and found unreadable).
 */
export function isStreamed(data: unknown): boolean {
  try {
    return isDeferred(data) || (isPlainObject(data) && hasDeferredMember(data))
  } catch {
    return false
  }
}

/**
 * True when tRPC refuses `data` on a request that is not streamed (`httpLink`,
 * `httpBatchLink`): its `isDataStream` test, which answers 415 without reading the output.
 */
export function isRefusedUnstreamed(data: unknown): boolean {
  if (!isObject(data)) return false
  try {
    return isAsyncIterable(data) || Object.values(data).some(isDeferred)
  } catch {
    return false
  }
}

/**
 * Whether tRPC answers this call with a stream: a batch (`batch=1`) asking for jsonl (the
 * `trpc-accept` or `accept` header). Undefined when the context holds no request (`createCaller`:
 * the caller itself reads what the procedure returns).
 */
export function streamsResponse(ctx: unknown): boolean | undefined {
  const req = (ctx as { req?: { headers?: unknown; url?: unknown } } | null | undefined)?.req
  if (req === null || typeof req !== 'object') return undefined
  const header = (name: string): string | undefined => {
    const { headers } = req
    if (headers instanceof Headers) return headers.get(name) ?? undefined
    const value = (headers as Record<string, unknown> | undefined)?.[name]
    return typeof value === 'string' ? value : undefined
  }
  const accept = header('trpc-accept') ?? header('accept') ?? ''
  const jsonl = accept.split(',').some((type) => type.trim() === 'application/jsonl')
  const url = typeof req.url === 'string' ? new URL(req.url, 'http://localhost') : undefined
  return jsonl && url?.searchParams.get('batch') === '1'
}

/** What tRPC itself answers for a streamed output on a request that is not streamed. */
export const unstreamedRefusal = () =>
  new TRPCError({
    code: 'UNSUPPORTED_MEDIA_TYPE',
    message: 'Cannot use stream-like response in non-streaming request - use httpBatchStreamLink',
  })

/** A plain output as recorded: as it is, unless it has the tag's key (then it is escaped). */
export function recordablePlain(data: unknown): unknown {
  return isPlainObject(data) && Object.hasOwn(data, streamTag)
    ? { [streamTag]: 'plain', value: data }
    : data
}

/** The output a replay returns: the recorded value, with a recorded stream made a stream again. */
export function replayable(recorded: unknown): unknown {
  if (!isPlainObject(recorded) || !Object.hasOwn(recorded, streamTag)) return recorded
  if (recorded[streamTag] === 'plain') return recorded.value
  if (recorded[streamTag] === 'stream') return replayPart(recorded.value)
  return recorded
}

/** How a recorded stream ended for the middleware: recorded whole, failed, or abandoned. */
export type StreamEnd =
  | { kind: 'consumed'; recorded: unknown }
  /** An unexpected failure: the key is released. */
  | { kind: 'failed'; error: unknown }
  /** The reader stopped before the end (`return()`): the key is released. */
  | { kind: 'abandoned' }

export interface StreamRecordingOptions {
  /** A failure's record data when the failure policy records it; undefined releases the key. */
  recordFailure(error: unknown): unknown
  /** Called once, when the stream has ended one way or another. */
  end(result: StreamEnd): void
}

interface PromiseSlot {
  [streamTag]: 'promise'
  value?: unknown
  error?: unknown
}

interface IterableSlot {
  [streamTag]: 'iterable'
  items: unknown[]
  returned?: unknown
  error?: unknown
}

type Slot = PromiseSlot | IterableSlot

interface Captured {
  /** What tRPC reads: the output with its streamed parts wrapped. */
  live: unknown
  /** What is recorded, filled in as tRPC reads. */
  recorded: unknown
}

/**
 * Wraps the streamed parts of `data` (for which {@link isStreamed} is true) and returns what the
 * middleware hands tRPC. `options.end` is called once everything tRPC reads has been read (with
 * the recorded form), or at the first failure the policy does not record, or when tRPC stops
 * reading an iterable early.
 */
export function recordStream(data: unknown, options: StreamRecordingOptions): unknown {
  const recording = new StreamRecording(options)
  const { live, recorded } = capture(data, recording)
  recording.root = recorded
  return live
}

class StreamRecording {
  root: unknown
  #pending = 0
  #ended = false

  constructor(readonly options: StreamRecordingOptions) {}

  get ended(): boolean {
    return this.#ended
  }

  start(): void {
    this.#pending++
  }

  settle(): void {
    this.#pending--
    if (this.#pending === 0 && !this.#ended) {
      this.#end({ kind: 'consumed', recorded: { [streamTag]: 'stream', value: this.root } })
    }
  }

  /** A part failed: recorded in its slot when the policy records it, else the end. */
  fail(error: unknown, slot: Slot): void {
    if (this.#ended) return
    let recorded: unknown
    try {
      recorded = this.options.recordFailure(error)
    } catch {
      recorded = undefined
    }
    if (recorded === undefined) this.#end({ kind: 'failed', error })
    else {
      slot.error = recorded
      this.settle()
    }
  }

  abandon(): void {
    if (!this.#ended) this.#end({ kind: 'abandoned' })
  }

  #end(result: StreamEnd): void {
    this.#ended = true
    this.options.end(result)
  }
}

function capture(value: unknown, recording: StreamRecording): Captured {
  if (isPromise(value)) return capturePromise(value, recording)
  if (isAsyncIterable(value)) return captureIterable(value, recording)
  if (!isPlainObject(value) || !hasDeferredMember(value)) return { live: value, recorded: value }
  // Only the members tRPC's stream reads as streamed parts; the rest go through as they are.
  const live: [string, unknown][] = []
  const recorded: [string, unknown][] = []
  for (const [name, item] of Object.entries(value)) {
    const part = isDeferred(item) ? capture(item, recording) : { live: item, recorded: item }
    live.push([name, part.live])
    recorded.push([name, part.recorded])
  }
  return { live: Object.fromEntries(live), recorded: Object.fromEntries(recorded) }
}

function capturePromise(promise: Promise<unknown>, recording: StreamRecording): Captured {
  const slot: PromiseSlot = { [streamTag]: 'promise' }
  recording.start()
  const live = promise.then(
    (value) => {
      const part = capture(value, recording)
      slot.value = part.recorded
      recording.settle()
      return part.live
    },
    (error: unknown) => {
      recording.fail(error, slot)
      throw error
    },
  )
  return { live, recorded: slot }
}

function captureIterable(iterable: AsyncIterable<unknown>, recording: StreamRecording): Captured {
  const slot: IterableSlot = { [streamTag]: 'iterable', items: [] }
  recording.start()
  let started = false
  const live: AsyncIterable<unknown> = {
    [Symbol.asyncIterator]() {
      // One reading is recorded; tRPC reads each iterable once.
      if (started) throw new TypeError('idempotent-mutations: a streamed output is read once')
      started = true
      const iterator = iterable[Symbol.asyncIterator]()
      let finished = false
      return {
        async next() {
          let step: IteratorResult<unknown>
          try {
            step = await iterator.next()
          } catch (error) {
            finished = true
            recording.fail(error, slot)
            throw error
          }
          const part = capture(step.value, recording)
          if (step.done) {
            finished = true
            slot.returned = part.recorded
            recording.settle()
          } else {
            slot.items.push(part.recorded)
          }
          return { done: step.done, value: part.live } as IteratorResult<unknown>
        },
        async return(value?: unknown) {
          if (!finished) {
            finished = true
            recording.abandon()
          }
          return (await iterator.return?.(value)) ?? { done: true, value }
        },
      }
    },
  }
  return { live, recorded: slot }
}

/** A recorded part as tRPC reads it on a replay: the same values, streamed again. */
function replayPart(recorded: unknown): unknown {
  if (!isPlainObject(recorded)) return recorded
  const kind = recorded[streamTag]
  if (kind === 'promise') {
    const slot = recorded as unknown as PromiseSlot
    if (slot.error === undefined) return Promise.resolve(replayPart(slot.value))
    const rejected = Promise.reject(replayError(slot.error))
    // Read by tRPC a moment later: not an unhandled rejection meanwhile.
    rejected.catch(() => {})
    return rejected
  }
  if (kind === 'iterable') return replayIterable(recorded as unknown as IterableSlot)
  if (!hasTaggedMember(recorded)) return recorded
  return Object.fromEntries(
    Object.entries(recorded).map(([name, item]) => [name, replayPart(item)] as const),
  )
}

async function* replayIterable(slot: IterableSlot): AsyncGenerator<unknown, unknown> {
  for (const item of slot.items) yield replayPart(item)
  if (slot.error !== undefined) throw replayError(slot.error)
  return replayPart(slot.returned)
}

function hasTaggedMember(value: Record<string, unknown>): boolean {
  for (const name in value) {
    const item = value[name]
    if (Object.hasOwn(value, name) && isPlainObject(item) && Object.hasOwn(item, streamTag)) {
      return true
    }
  }
  return false
}
