import superjson, { SuperJSON, type SuperJSONResult } from 'superjson'

/**
 * The superjson the default codec writes with: a private instance, so the types registered here
 * never change the global `superjson` an application may also use as its tRPC transformer.
 *
 * Three kinds of value get their own rule, because superjson's defaults do not read them back as
 * they were written:
 * - a Node `Buffer` (written as a typed array superjson cannot name on the way back);
 * - typed arrays, `ArrayBuffer` and `DataView` (written as their bytes: superjson's own form goes
 *   through JSON numbers, which turns a `NaN` in a `Float64Array` into 0);
 * - errors (superjson's own form sets an own enumerable `name` on the decoded error, which then
 *   shows in the JSON a client gets, and drops the error's own fields).
 */
export const codecSuperJson = new SuperJSON()

codecSuperJson.registerCustom<Buffer, string>(
  {
    isApplicable: (value): value is Buffer => Buffer.isBuffer(value),
    serialize: (value) => value.toString('base64'),
    deserialize: (text) => Buffer.from(text, 'base64'),
  },
  'Buffer',
)

/** The binary views a record keeps byte for byte, by constructor name. */
const binaryTypes = {
  Int8Array,
  Uint8Array,
  Uint8ClampedArray,
  Int16Array,
  Uint16Array,
  Int32Array,
  Uint32Array,
  Float32Array,
  Float64Array,
  BigInt64Array,
  BigUint64Array,
  DataView,
} as const
type BinaryTypeName = keyof typeof binaryTypes

function binaryTypeOf(value: unknown): BinaryTypeName | undefined {
  if (!ArrayBuffer.isView(value) || Buffer.isBuffer(value)) return undefined
  for (const name of Object.keys(binaryTypes) as BinaryTypeName[]) {
    if (Object.getPrototypeOf(value) === binaryTypes[name].prototype) return name
  }
  return undefined
}

codecSuperJson.registerCustom<ArrayBufferView | ArrayBuffer, [string, string]>(
  {
    isApplicable: (value): value is ArrayBufferView | ArrayBuffer =>
      value instanceof ArrayBuffer || binaryTypeOf(value) !== undefined,
    serialize: (value) => {
      if (value instanceof ArrayBuffer) {
        return ['ArrayBuffer', Buffer.from(value).toString('base64')]
      }
      const bytes = Buffer.from(value.buffer, value.byteOffset, value.byteLength)
      return [binaryTypeOf(value) as string, bytes.toString('base64')]
    },
    deserialize: ([name, text]) => {
      const bytes = Buffer.from(text, 'base64')
      // A copy into a buffer of its own: Buffer.from may hand out a slice of a shared pool.
      const buffer = new ArrayBuffer(bytes.length)
      new Uint8Array(buffer).set(bytes)
      if (name === 'ArrayBuffer') return buffer
      const type = binaryTypes[name as BinaryTypeName]
      if (type === undefined) throw new TypeError(`unknown binary type ${name}`)
      if (type === DataView) return new DataView(buffer)
      const elementSize = (type as unknown as { BYTES_PER_ELEMENT: number }).BYTES_PER_ELEMENT
      return new (type as Uint8ArrayConstructor)(buffer, 0, bytes.length / elementSize)
    },
  },
  'binary',
)

/** A recorded error: its name and message, its own enumerable fields in order, its cause. */
type RecordedError = {
  name: string
  message: string
  /** superjson's own form of the fields, so Dates, BigInts and the like inside keep their type. */
  fields: Written
  /** The cause as superjson writes it, when the error has one (JSON shows none; superjson does). */
  cause?: Written
}
/** What `serialize` returns: JSON, typed loosely enough to sit inside a custom type's JSON. */
type Written = { json: Json; meta?: Json }
type Json = string | number | boolean | null | Json[] | { [key: string]: Json }

codecSuperJson.registerCustom<Error, RecordedError>(
  {
    isApplicable: (value): value is Error => value instanceof Error,
    serialize: (error) => {
      const fields: Record<string, unknown> = {}
      for (const name of Object.keys(error)) fields[name] = (error as never)[name]
      const recorded: RecordedError = {
        name: String(error.name),
        message: String(error.message),
        fields: codecSuperJson.serialize(fields) as unknown as Written,
      }
      if ('cause' in error)
        recorded.cause = codecSuperJson.serialize({ cause: error.cause }) as unknown as Written
      return recorded
    },
    deserialize: (recorded) => rebuildError(recorded),
  },
  'Error',
)

/**
 * An error with exactly the recorded own enumerable fields, in their order (a class field
 * `name` is one, a plain `new Error()`'s name is not), the same name and message, and a stack
 * that is only its first line: neither where the replay decoded it nor the original's frames.
 */
function rebuildError(recorded: RecordedError): Error {
  const error = new Error()
  delete (error as { stack?: unknown }).stack
  const fields = codecSuperJson.deserialize(recorded.fields as SuperJSONResult) as Record<
    string,
    unknown
  >
  for (const name of Object.keys(fields)) {
    Object.defineProperty(error, name, {
      value: fields[name],
      enumerable: true,
      writable: true,
      configurable: true,
    })
  }
  const hidden = (name: string, value: unknown) => {
    if (!Object.hasOwn(error, name)) {
      Object.defineProperty(error, name, { value, writable: true, configurable: true })
    }
  }
  if (error.name !== recorded.name) hidden('name', recorded.name)
  if (error.message !== recorded.message) hidden('message', recorded.message)
  if (recorded.cause !== undefined) {
    hidden(
      'cause',
      (codecSuperJson.deserialize(recorded.cause as SuperJSONResult) as { cause: unknown }).cause,
    )
  }
  hidden('stack', recorded.message ? `${recorded.name}: ${recorded.message}` : recorded.name)
  return error
}

/**
 * What a client is sent for `value` when no transformer is in the way: its JSON, with BigInts
 * (which JSON refuses) written as tagged text and a value JSON cannot write at all (a cycle) as
 * one marker, so that two values can be compared by what the wire would carry.
 */
function wireJson(value: unknown): string | undefined {
  try {
    return JSON.stringify(value, (_key, item) =>
      typeof item === 'bigint' ? { 'idempotent-mutations:bigint': item.toString() } : item,
    )
  } catch {
    return '\u0000unwritable'
  }
}

/**
 * What a client of an app whose tRPC transformer is the global superjson is sent for `value`
 * (with whatever types the app registered on it): an unregistered symbol at the top, for one,
 * becomes no value there, and `undefined` after a round trip.
 */
function superjsonWire(value: unknown): string | undefined {
  try {
    return JSON.stringify(superjson.serialize(value))
  } catch {
    return '\u0000unwritable'
  }
}

/**
 * superjson's text for `value`, checked to read back faithfully: it decodes, the decoded value
 * encodes to the very same text, and a client would be sent the same JSON for both (with no
 * transformer, and with superjson as the app's transformer). Throws when any of these fails (a
 * getter that throws, a proxy that answers differently each time, a class whose `toJSON` the
 * decoded plain object lacks): the engine then keeps the record without a body.
 */
export function encodeFaithfully(value: unknown): string {
  const text = codecSuperJson.stringify(value)
  const decoded = codecSuperJson.parse(text)
  if (codecSuperJson.stringify(decoded) !== text) {
    throw new Error('the outcome does not read back as it was written (its encoding differs)')
  }
  // Made only of types that read back as themselves: superjson's wire is then the same for both,
  // and JSON's too, unless the value changed between two reads (a getter, a proxy).
  if (hasOnlyFaithfulTypes(value, 0, new Set())) {
    if (wireJson(decoded) !== wireJson(value)) {
      throw new Error('the outcome does not read back as it was written (its JSON differs)')
    }
    return text
  }
  // An outcome's value (or error) reaches the transport on its own, where a symbol and the
  // undefined it reads back as are written differently: each member is compared on its own
  // (which covers the whole, unless the object has its own `toJSON`).
  if (!isPlainRecord(value) || Object.hasOwn(value, 'toJSON')) {
    if (!sameOnTheWire(decoded, value)) {
      throw new Error('the outcome does not read back as it was written (its JSON differs)')
    }
  }
  if (isPlainRecord(value)) {
    for (const name of Object.keys(value)) {
      if (!sameOnTheWire((decoded as Record<string, unknown>)[name], value[name])) {
        throw new Error(`the outcome does not read back as it was written (its ${name} differs)`)
      }
    }
  }
  return text
}

function sameOnTheWire(decoded: unknown, value: unknown): boolean {
  return wireJson(decoded) === wireJson(value) && superjsonWire(decoded) === superjsonWire(value)
}

function isPlainRecord(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object') return false
  const prototype = Object.getPrototypeOf(value)
  return prototype === Object.prototype || prototype === null
}

const faithfulPrototypes = new Set<unknown>([Date.prototype, RegExp.prototype])

/**
 * True when `value` holds only types known to read back as themselves: primitives other than
 * symbols, arrays without holes, plain objects without `toJSON`, Dates, RegExps, Maps, Sets,
 * typed arrays and Buffers, each met once, nested at most 64 deep. Anything else (errors,
 * class instances, symbols, functions, shared references) takes the full comparison.
 */
function hasOnlyFaithfulTypes(value: unknown, depth: number, seen: Set<object>): boolean {
  if (typeof value !== 'object') return typeof value !== 'symbol' && typeof value !== 'function'
  if (value === null) return true
  if (depth > 64 || seen.has(value)) return false
  seen.add(value)
  const prototype = Object.getPrototypeOf(value)
  if (Array.isArray(value)) {
    if (prototype !== Array.prototype) return false
    for (let i = 0; i < value.length; i++) {
      if (!(i in value) || !hasOnlyFaithfulTypes(value[i], depth + 1, seen)) return false
    }
    return true
  }
  if (prototype === Object.prototype || prototype === null) {
    for (const name in value) {
      if (name === 'toJSON') return false
      const item = (value as Record<string, unknown>)[name]
      if (!hasOnlyFaithfulTypes(item, depth + 1, seen)) return false
    }
    return true
  }
  if (faithfulPrototypes.has(prototype)) return true
  if (prototype === Map.prototype || prototype === Set.prototype) {
    for (const entry of value as Map<unknown, unknown> | Set<unknown>) {
      if (!hasOnlyFaithfulTypes(entry, depth + 1, seen)) return false
    }
    return true
  }
  return (
    (Buffer.isBuffer(value) && prototype === Buffer.prototype) || binaryTypeOf(value) !== undefined
  )
}
