import { createHash } from 'node:crypto'
import { configure } from 'safe-stable-stringify'
import superjson from 'superjson'

/**
 * Turns recorded outcomes into text and back. The default keeps `Date`, `BigInt`, `Map`, `Set`,
 * `undefined`, `RegExp` and nested structures (superjson), so a replay hands the caller the same
 * value the first caller got.
 */
export interface Codec {
  encode(value: unknown): string
  decode(text: string): unknown
}

export const defaultCodec: Codec = {
  encode: (value) => superjson.stringify(value),
  decode: (text) => superjson.parse(text),
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
  const text = canonicalJson(payload === undefined ? null : payload, canonicalReplacer) ?? 'null'
  return createHash('sha256').update(text).digest('base64url')
}

/** A stable, opaque derivation of several strings (used for downstream keys). */
export function hashParts(...parts: string[]): string {
  const hash = createHash('sha256')
  for (const part of parts) hash.update(`${part.length}:${part}`)
  return hash.digest('base64url')
}
