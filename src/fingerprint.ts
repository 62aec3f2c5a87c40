import { configure } from 'safe-stable-stringify'
import { jsonString, sha256 } from './hash'

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
