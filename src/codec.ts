import { codecSuperJson, encodeFaithfully } from './faithful'

/**
 * Turns recorded outcomes into text and back. The default keeps `Date`, `BigInt`, `Map`, `Set`,
 * `undefined`, `RegExp`, Buffers, typed arrays, errors and nested structures (superjson, with a
 * few types of its own), so a replay hands the caller the same value the first caller got.
 * `encode` may throw for a value it cannot write; the outcome is then kept without a body.
 */
export interface Codec {
  encode(value: unknown): string
  decode(text: string): unknown
}

export const defaultCodec: Codec = {
  // Most outcomes are plain JSON, and superjson writes those as `{"json":<the JSON>}` with no
  // meta: writing that directly skips superjson's walk (and its garbage) on every first
  // execution. Anything else (Dates, Maps, undefined, -0, shared references, ...) is superjson's,
  // checked to read back as it was written: a record is written only if it can be read back.
  encode: (value) =>
    isPlainJson(value, 0, new ObjectsSeen())
      ? `{"json":${JSON.stringify(value)}}`
      : encodeFaithfully(value),
  decode: (text) => codecSuperJson.parse(text),
}

/**
 * The outcome as `codec` writes it, refused (thrown) unless the text reads back: the default
 * codec checks its own encodings in full; another codec's text must at least decode.
 */
export function encodeReadably(codec: Codec, outcome: unknown): string {
  const text = codec.encode(outcome)
  if (codec !== defaultCodec) codec.decode(text)
  return text
}

/** What `defaultCodec` writes before the value of a successful outcome (`{ ok: true, value }`). */
const okOutcomePrefix = '{"json":{"ok":true,"value":'

/** Returned by {@link plainOkValue} for a text it leaves to the codec's own `decode`. */
export const notPlainOk = Symbol('notPlainOk')

/**
 * The value of a successful outcome that `defaultCodec` wrote as plain JSON
 * (`{"json":{"ok":true,"value":…}}`, no superjson meta), parsed from the value's own text: this
 * skips the two wrapper objects and `superjson.parse`, and every replay decodes one. Anything else
 * (a recorded error, superjson meta, a text of another shape) answers `notPlainOk`.
 */
export function plainOkValue(text: string): unknown {
  const end = text.length - 2
  if (
    end < okOutcomePrefix.length ||
    text.charCodeAt(end) !== 125 /* } */ ||
    text.charCodeAt(end + 1) !== 125 ||
    // superjson writes its meta last, ending `"v":1}}`: a value ending in `1` is checked in full.
    (text.charCodeAt(end - 1) === 49 /* 1 */ && text.endsWith('"v":1}}')) ||
    text.lastIndexOf(okOutcomePrefix, 0) !== 0
  ) {
    return notPlainOk
  }
  try {
    return JSON.parse(text.slice(okOutcomePrefix.length, end))
  } catch {
    // Not one JSON value between the prefix and `}}` (a text this codec did not write).
    return notPlainOk
  }
}

/**
 * The objects met so far in one walk: a short array searched in turn, which costs less than a
 * `Set` for the few objects of a typical outcome, and a `Set` once there are many.
 */
class ObjectsSeen {
  #few: object[] = []
  #many: Set<object> | undefined
  /** Adds `value`; false if it was there already. */
  add(value: object): boolean {
    if (this.#many) {
      if (this.#many.has(value)) return false
      this.#many.add(value)
      return true
    }
    if (this.#few.includes(value)) return false
    this.#few.push(value)
    if (this.#few.length > 32) this.#many = new Set(this.#few)
    return true
  }
}

/**
 * True when superjson would add no meta to `value`: strings, booleans, null, finite numbers other
 * than -0, arrays and plain objects of those, with no object met twice and no key superjson
 * refuses. Nesting deeper than 64 answers false (superjson then decides).
 */
function isPlainJson(value: unknown, depth: number, seen: ObjectsSeen): boolean {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return true
    case 'number':
      return Number.isFinite(value) && !Object.is(value, -0)
    case 'object': {
      if (value === null) return true
      if (depth > 64) return false
      // superjson records an object met twice as a shared reference.
      if (!seen.add(value)) return false
      if (Array.isArray(value)) {
        if (Object.getPrototypeOf(value) !== Array.prototype) return false
        for (let i = 0; i < value.length; i++) {
          if (!(i in value) || !isPlainJson(value[i], depth + 1, seen)) return false
        }
        return true
      }
      const prototype = Object.getPrototypeOf(value)
      if (prototype !== Object.prototype && prototype !== null) return false
      for (const key in value) {
        if (key === '__proto__' || key === 'constructor' || key === 'prototype') return false
        if (key === 'toJSON') return false
        if (!isPlainJson((value as Record<string, unknown>)[key], depth + 1, seen)) return false
      }
      return true
    }
    default:
      return false
  }
}
