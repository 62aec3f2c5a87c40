import { parseItem } from 'structured-headers'
import { KeyInvalidError } from './errors'

/** The header a client names its operation with (matched case-insensitively). */
export const idempotencyKeyHeader = 'Idempotency-Key'
/** The default input field / argument name that carries a per-call key. */
export const defaultKeyField = 'idempotencyKey'

/** 1-255 visible ASCII characters (0x21-0x7E): a loop, which costs half what a regex test does. */
function isValidKey(key: string): boolean {
  const length = key.length
  if (length === 0 || length > 255) return false
  for (let i = 0; i < length; i++) {
    const code = key.charCodeAt(i)
    if (code < 0x21 || code > 0x7e) return false
  }
  return true
}

/**
 * Checks a key against SPEC's rule (1-255 visible ASCII characters) and returns it.
 * Runs before a key touches SQL or a log line; the error never echoes the key itself.
 */
export function validateKey(key: unknown): string {
  if (typeof key !== 'string') throw new KeyInvalidError(`expected a string, got ${typeOf(key)}`)
  if (isValidKey(key)) return key
  if (key.length === 0) throw new KeyInvalidError('the key is empty')
  if (key.length > 255) throw new KeyInvalidError(`the key has ${key.length} characters`)
  throw new KeyInvalidError('the key contains a space, a control or a non-ASCII character')
}

/**
 * Reads the `Idempotency-Key` header value. Accepts the IETF form (a quoted structured-field
 * string, `"8e03…"`) and a bare token. A repeated header (an array, or the `", "`-joined list
 * Fetch and Node make of it) naming two different keys is invalid: one request names one
 * operation; the same key repeated is that key.
 * Returns `undefined` when the header is absent.
 */
export function parseKeyHeader(
  value: string | readonly string[] | null | undefined,
): string | undefined {
  if (value === null || value === undefined) return undefined
  if (typeof value !== 'string') {
    if (value.length === 0) return undefined
    const distinct = new Set(value.map((v) => parseKeyHeader(v)))
    if (distinct.size > 1)
      throw new KeyInvalidError('the Idempotency-Key header was sent more than once')
    return [...distinct][0]
  }
  const trimmed = value.trim()
  // A key has no spaces, so ", " can only be how Fetch Headers and Node join a repeated
  // header: read it as the list it is (the same key twice is still one key).
  if (/,\s/.test(trimmed)) return parseKeyHeader(trimmed.split(/,\s+/))
  if (trimmed.startsWith('"')) {
    let item: ReturnType<typeof parseItem>
    try {
      item = parseItem(trimmed)
    } catch {
      throw new KeyInvalidError('the header is not a valid structured-field string')
    }
    if (typeof item[0] !== 'string') throw new KeyInvalidError('the header is not a string')
    return validateKey(item[0])
  }
  return validateKey(trimmed)
}

/** Reads a header from a Fetch `Headers`, a Node `IncomingHttpHeaders` object or a plain record. */
export function readKeyHeader(headers: unknown): string | undefined {
  if (headers === null || typeof headers !== 'object') return undefined
  if (typeof (headers as Headers).get === 'function') {
    return parseKeyHeader((headers as Headers).get(idempotencyKeyHeader))
  }
  const record = headers as Record<string, string | string[] | undefined>
  // Node's IncomingHttpHeaders names every header in lower case: found without a scan.
  const lowerCase = record['idempotency-key']
  if (lowerCase !== undefined) return parseKeyHeader(lowerCase)
  const name = Object.keys(record).find((h) => h.toLowerCase() === 'idempotency-key')
  return name === undefined ? undefined : parseKeyHeader(record[name])
}

/**
 * Splits a per-call key out of an input object: returns the key (validated) and the input
 * without it, so the key never becomes part of the fingerprint.
 */
export function splitInputKey(
  input: unknown,
  field: string = defaultKeyField,
): { key: string | undefined; payload: unknown } {
  if (input === null || typeof input !== 'object' || Array.isArray(input) || !(field in input)) {
    return { key: undefined, payload: input }
  }
  const { [field]: raw, ...payload } = input as Record<string, unknown>
  if (raw === undefined || raw === null) return { key: undefined, payload }
  return { key: validateKey(raw), payload }
}

/**
 * Picks the one key several sources agree on. Two sources naming different keys for one
 * operation is a client bug: `KEY_INVALID`, and nothing runs.
 */
export function agreeOnKey(...keys: (string | undefined)[]): string | undefined {
  let found: string | undefined
  for (const key of keys) {
    if (key === undefined) continue
    if (found !== undefined && found !== key) {
      throw new KeyInvalidError(
        'two different keys were sent for one operation (from its header, input, arguments or extensions)',
      )
    }
    found = key
  }
  return found
}

function typeOf(value: unknown): string {
  return value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value
}

/**
 * A caller's scope as the adapters' `scope` option returns it: a string or number, or nothing
 * (the shared scope ''). Anything else is a programming error, refused rather than turned into
 * text: `String(user)` would give every user the same scope, `[object Object]`, and let one
 * tenant's records answer another's retries.
 */
export function callerScope(scope: unknown, where: string): string {
  if (scope === undefined || scope === null) return ''
  if (typeof scope !== 'string' && typeof scope !== 'number') {
    throw new TypeError(
      `idempotent-mutations: ${where} must return a string, a number or undefined (got ${typeof scope})`,
    )
  }
  return String(scope)
}
