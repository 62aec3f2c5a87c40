import {
  hasDeferredMember,
  type IterableSlot,
  isAsyncIterable,
  isDeferred,
  isPlainObject,
  isPromise,
  type ObjectSlot,
  type PromiseSlot,
  recordablePlain,
  streamTag,
} from './stream'

/** How a recorded stream ended for the middleware: recorded whole, failed, or abandoned. */
export type StreamEnd =
  | { kind: 'consumed'; recorded: unknown }
  /** An unexpected failure: the key is released. */
  | { kind: 'failed'; error: unknown }
  /** The reader stopped before the end (`return()`, or the request was aborted): released. */
  | { kind: 'abandoned' }

export interface StreamRecordingOptions {
  /** A failure's record data when the failure policy records it; undefined releases the key. */
  recordFailure(error: unknown): unknown
  /** Called once, when the stream has ended one way or another. */
  end(result: StreamEnd): void
  /**
   * The call's abort signal (the client hung up). tRPC stops reading then, and what it had not
   * read yet is never sent: the recording is abandoned (the key released) rather than completed
   * with parts the client never got, or left in progress until its lease ends.
   */
  signal?: AbortSignal | undefined
}

type Slot = PromiseSlot | IterableSlot

interface Captured {
  /** What tRPC reads: the output with its streamed parts wrapped. */
  live: unknown
  /** What is recorded, filled in as tRPC reads. */
  recorded: unknown
}

/**
 * Wraps the streamed parts of `data` (for which `isStreamed` is true) and returns what the
 * middleware hands tRPC. `options.end` is called once everything tRPC reads has been read (with
 * the recorded form), or at the first failure the policy does not record, or when tRPC stops
 * reading early.
 */
export function recordStream(data: unknown, options: StreamRecordingOptions): unknown {
  const recording = new StreamRecording(options)
  const { live, recorded } = capture(data, recording)
  recording.root = recorded
  const { signal } = options
  if (signal?.aborted) recording.abandon()
  else signal?.addEventListener('abort', () => recording.abandon(), { once: true })
  return live
}

class StreamRecording {
  root: unknown
  #pending = 0
  #ended = false
  #order = 0

  constructor(readonly options: StreamRecordingOptions) {}

  start(): void {
    this.#pending++
  }

  /** The next place in the order parts settle (what tRPC writes next). */
  nextOrder(): number {
    return this.#order++
  }

  settle(): void {
    this.#pending--
    if (this.#pending === 0 && !this.#ended) {
      this.#end({ kind: 'consumed', recorded: { [streamTag]: 'stream', value: this.root } })
    }
  }

  /** A part failed: recorded in its slot when the policy records it, else the end. */
  fail(error: unknown, slot: Slot, place: (order: number) => void): void {
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
      place(this.nextOrder())
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

/**
 * What tRPC sends for a part (a promise's value, an item, a return value) that is no object:
 * the part goes out inside an array, where JSON (and superjson) write a function or a symbol as
 * null, so null is what is recorded.
 */
const asSent = (value: unknown) =>
  typeof value === 'function' || typeof value === 'symbol' ? null : value

function capture(value: unknown, recording: StreamRecording): Captured {
  if (isPromise(value)) return capturePromise(value, recording)
  if (isAsyncIterable(value)) return captureIterable(value, recording)
  if (!isPlainObject(value) || !hasDeferredMember(value)) {
    return { live: value, recorded: recordablePlain(asSent(value)) }
  }
  // Only the members tRPC's stream reads as streamed parts; the rest go through as they are.
  const live: [string, unknown][] = []
  const recorded: [string, unknown][] = []
  for (const [name, item] of Object.entries(value)) {
    const part = isDeferred(item)
      ? capture(item, recording)
      : { live: item, recorded: recordablePlain(item) }
    live.push([name, part.live])
    recorded.push([name, part.recorded])
  }
  const slot: ObjectSlot = { [streamTag]: 'object', value: Object.fromEntries(recorded) }
  return { live: Object.fromEntries(live), recorded: slot }
}

/** `capture`, with a throw (a getter in what a part resolved to) failing the recording. */
function captureOrFail(
  value: unknown,
  recording: StreamRecording,
  slot: Slot,
  place: (order: number) => void,
): Captured {
  try {
    return capture(value, recording)
  } catch (error) {
    recording.fail(error, slot, place)
    throw error
  }
}

function capturePromise(promise: Promise<unknown>, recording: StreamRecording): Captured {
  const slot: PromiseSlot = { [streamTag]: 'promise' }
  const place = (order: number) => {
    slot.order = order
  }
  recording.start()
  const live = promise.then(
    (value) => {
      const part = captureOrFail(value, recording, slot, place)
      slot.value = part.recorded
      place(recording.nextOrder())
      recording.settle()
      return part.live
    },
    (error: unknown) => {
      recording.fail(error, slot, place)
      throw error
    },
  )
  return { live, recorded: slot }
}

function captureIterable(iterable: AsyncIterable<unknown>, recording: StreamRecording): Captured {
  const slot: IterableSlot = { [streamTag]: 'iterable', items: [], orders: [] }
  const place = (order: number) => slot.orders?.push(order)
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
          let part: Captured
          try {
            step = await iterator.next()
            part = capture(step.value, recording)
          } catch (error) {
            finished = true
            recording.fail(error, slot, place)
            throw error
          }
          place(recording.nextOrder())
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
