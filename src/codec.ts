import * as crypto from 'node:crypto'
import { configure } from 'safe-stable-stringify'
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

const canonicalJson = configure({ bigint: true, circularValue: Error, deterministic: true })

function canonicalReplacer(_key: string, value: unknown): unknown {
  if (value instanceof Map) return { $map: [...value.entries()] }
  if (value instanceof Set) return { $set: [...value.values()] }
  if (typeof value === 'bigint') return { $bigint: value.toString() }
  if (isPlainObject(value) && Object.keys(value).some((key) => key.startsWith('$'))) {
    // A plain object's own `$` keys get one more `$`, so `{ $map: [...] }` sent as data can
    // never hash like a Map (whose tag keeps a single `$`).
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) => [key.startsWith('$') ? `$${key}` : key, item]),
    )
  }
  return value
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object') return false
  const prototype = Object.getPrototypeOf(value)
  return prototype === Object.prototype || prototype === null
}

/**
 * A SHA-256 of the payload's canonical JSON: object key order does not matter, values do.
 * Maps, Sets and BigInts are tagged, and plain keys escaped, so they cannot collide with
 * look-alike plain values.
 */
export function fingerprint(payload: unknown): string {
  return sha256(canonicalText(payload === undefined ? null : payload))
}

/** The text {@link fingerprint} hashes: canonical JSON, with Maps, Sets and BigInts tagged. */
export function canonicalText(value: unknown): string {
  const text = appendCanonicalJson('', value, 0)
  if (text !== unusual) return text
  try {
    return canonicalJson(value, canonicalReplacer) ?? 'null'
  } catch (error) {
    // Nested deeper than the call stack reaches (JSON.parse, which does not recurse, accepts such
    // input): the same text, written without recursion, for plain values.
    if (error instanceof RangeError) {
      const deep = canonicalTextWithoutRecursion(value)
      if (deep !== undefined) return deep
    }
    throw error
  }
}

/** An array or object being written by {@link canonicalTextWithoutRecursion}. */
interface OpenValue {
  value: object
  /** An object's member names, sorted; undefined for an array. */
  names: string[] | undefined
  /** The object has `$` names, which are written with one more `$`. */
  escaped: boolean
  next: number
  /** Whether a member or item has been written (the next one follows a comma). */
  written: boolean
}

/**
 * The canonical text of a plain value (plain objects and arrays of strings, numbers, booleans,
 * null and undefined), with an explicit stack instead of recursion: the text the general path
 * writes for it (sorted keys, `$` keys escaped as canonicalReplacer escapes them, undefined
 * members left out and undefined items written as null, non-finite numbers as null).
 * Undefined for anything else, and for a cycle, which the caller then reports as it was.
 * Exported for its test.
 */
export function canonicalTextWithoutRecursion(root: unknown): string | undefined {
  let out = ''
  const stack: OpenValue[] = []
  const onPath = new Set<object>()
  // Writes a scalar, or opens an array or object; false for what only the general path knows.
  const write = (value: unknown): boolean => {
    switch (typeof value) {
      case 'string':
        out += jsonString(value)
        return true
      case 'number':
        out += Number.isFinite(value) ? String(value) : 'null'
        return true
      case 'boolean':
        out += value ? 'true' : 'false'
        return true
      case 'undefined':
        out += 'null'
        return true
      case 'object': {
        if (value === null) {
          out += 'null'
          return true
        }
        if (onPath.has(value) || typeof (value as { toJSON?: unknown }).toJSON === 'function') {
          return false
        }
        if (Array.isArray(value)) {
          if (Object.getPrototypeOf(value) !== Array.prototype) return false
          out += '['
          stack.push({ value, names: undefined, escaped: false, next: 0, written: false })
        } else {
          if (!isPlainObject(value)) return false
          // Sorted before the `$` escape, which keeps their order: a `$` key stays after the
          // keys below `$` and before the keys above it.
          const names = sortKeys(Object.keys(value))
          const escaped = names.some((name) => name.charCodeAt(0) === 36 /* $ */)
          out += '{'
          stack.push({ value, names, escaped, next: 0, written: false })
        }
        onPath.add(value)
        return true
      }
      default:
        return false
    }
  }
  if (!write(root)) return undefined
  for (let open = stack.at(-1); open !== undefined; open = stack.at(-1)) {
    const { names } = open
    if (names === undefined) {
      const items = open.value as unknown[]
      if (open.next === items.length) {
        out += ']'
      } else {
        if (open.next > 0) out += ','
        if (!write(items[open.next++])) return undefined
        continue
      }
    } else {
      const record = open.value as Record<string, unknown>
      let name: string | undefined
      let item: unknown
      // The next member that JSON writes: undefined ones are left out.
      while (open.next < names.length) {
        name = names[open.next++]!
        item = record[name]
        if (item !== undefined) break
        name = undefined
      }
      if (name !== undefined) {
        if (typeof item === 'function' || typeof item === 'symbol') return undefined
        const written = open.escaped && name.charCodeAt(0) === 36 ? `$${name}` : name
        out += `${open.written ? ',' : ''}${jsonString(written)}:`
        open.written = true
        if (!write(item)) return undefined
        continue
      }
      out += '}'
    }
    onPath.delete(open.value)
    stack.pop()
  }
  return out
}

// One-shot hashing (Node 20.12+) skips building a Hash object: about 1 µs per fingerprint.
const oneShotHash = (
  crypto as { hash?: (algorithm: string, data: string, encoding: string) => string }
).hash
/** SHA-256 of `text`, base64url. */
export const sha256 = oneShotHash
  ? (text: string) => oneShotHash('sha256', text, 'base64url')
  : (text: string) => crypto.createHash('sha256').update(text).digest('base64url')

/**
 * What JSON.stringify escapes in a string: `"`, `\\`, control characters and lone surrogates
 * (this also sends valid surrogate pairs to JSON.stringify, which leaves them as they are).
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it finds
const needsEscaping = /["\\\u0000-\u001f\ud800-\udfff]/

/** `JSON.stringify(text)`, for less: most strings need no escaping, and are just quoted. */
export function jsonString(text: string): string {
  return needsEscaping.test(text) ? JSON.stringify(text) : `"${text}"`
}

/** Returned by the fast path when the value needs the general one. */
const unusual = Symbol('unusual')

/**
 * `text` followed by the canonical JSON of the common payload (plain objects, arrays, strings,
 * finite numbers, booleans, null; `undefined` members left out and `null` in arrays) in one
 * pass, without the general path's replacer calls: the fingerprint is on every keyed call's path,
 * replays included. It writes exactly what the general path writes for such values (sorted keys,
 * JSON escaping), and answers `unusual` for anything else (Maps, Sets, BigInts, `toJSON`, class
 * instances, `$` keys, non-finite numbers, nesting deeper than 64, which includes cycles), which
 * then takes the general path. Each piece is appended to the text so far, which makes fewer and
 * smaller intermediate strings than returning each value's text for its parent to join.
 */
function appendCanonicalJson(text: string, value: unknown, depth: number): string | typeof unusual {
  switch (typeof value) {
    case 'string':
      return text + jsonString(value)
    case 'number':
      return Number.isFinite(value) ? text + String(value) : unusual
    case 'boolean':
      return text + (value ? 'true' : 'false')
    case 'object': {
      if (value === null) return `${text}null`
      if (depth > 64) return unusual
      if (Array.isArray(value)) {
        if (typeof (value as { toJSON?: unknown }).toJSON === 'function') return unusual
        let out: string | typeof unusual = `${text}[`
        for (let i = 0; i < value.length; i++) {
          if (i !== 0) out += ','
          const item: unknown = value[i]
          out = item === undefined ? `${out}null` : appendCanonicalJson(out, item, depth + 1)
          if (out === unusual) return unusual
        }
        return `${out}]`
      }
      const prototype = Object.getPrototypeOf(value)
      if (prototype !== Object.prototype && prototype !== null) return unusual
      const record = value as Record<string, unknown>
      if (typeof record.toJSON === 'function') return unusual
      const keys = sortKeys(Object.keys(record))
      let out: string | typeof unusual = text
      // 0 until a member is written: the first one opens the object (`{"key":`), the others
      // follow a comma (`,"key":`).
      let written: 0 | 1 = 0
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i]!
        if (key.charCodeAt(0) === 36 /* $ */) return unusual
        const item = record[key]
        if (item === undefined) continue
        out = appendCanonicalJson(out + memberPrefixes(key)[written], item, depth + 1)
        if (out === unusual) return unusual
        written = 1
      }
      return written === 0 ? `${out}{}` : `${out}}`
    }
    default:
      return unusual
  }
}

/**
 * `keys` in code-unit order, as `keys.sort()` puts them. The few keys of a typical payload object
 * sort in a fraction of the time through insertion than through the built-in sort.
 */
function sortKeys(keys: string[]): string[] {
  if (keys.length > 16) return keys.sort()
  for (let i = 1; i < keys.length; i++) {
    const key = keys[i]!
    let j = i - 1
    for (; j >= 0 && keys[j]! > key; j--) keys[j + 1] = keys[j]!
    keys[j + 1] = key
  }
  return keys
}

/**
 * What goes before a member's value: `{"key":` for an object's first member, `,"key":` for the
 * others. Payloads of one operation repeat the same few keys on every call, so short ones are
 * quoted once and kept (a bounded number of them) instead of going through `JSON.stringify` and
 * two more concatenations each time.
 */
const memberPrefixCache = new Map<string, readonly [string, string]>()
function memberPrefixes(key: string): readonly [string, string] {
  let prefixes = memberPrefixCache.get(key)
  if (prefixes === undefined) {
    const quoted = `${JSON.stringify(key)}:`
    prefixes = [`{${quoted}`, `,${quoted}`]
    if (key.length <= 64 && memberPrefixCache.size < 4096) memberPrefixCache.set(key, prefixes)
  }
  return prefixes
}

/** A stable, opaque derivation of several strings (used for downstream keys). */
export function hashParts(...parts: string[]): string {
  let text = ''
  for (const part of parts) text += `${part.length}:${part}`
  return sha256(text)
}
