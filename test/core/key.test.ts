import { describe, expect, it, vi } from 'vitest'
import { createIdempotency, createMemoryStore, readKeyHeader } from '../../src'
import { agreeOnKey, parseKeyHeader, splitInputKey, validateKey } from '../../src/key'

const invalidKeys: [string, unknown][] = [
  ['an empty key', ''],
  ['256 characters', 'k'.repeat(256)],
  ['a space', 'a b'],
  ['a tab', 'a\tb'],
  ['a NUL', 'a\u0000b'],
  ['a DEL', 'a\u007fb'],
  ['a newline', 'abc\n'],
  ['a non-ASCII letter', 'clé'],
  ['an emoji', 'key-🔑'],
  ['a number', 42],
  ['an object', { key: 'abc' }],
]

describe('key validation', () => {
  it('accepts 1 to 255 visible ASCII characters, punctuation included', () => {
    expect(validateKey('a')).toBe('a')
    expect(validateKey('k'.repeat(255))).toHaveLength(255)
    expect(validateKey('8e03978e-40d5-43e8-bc93-6894a57f9324')).toBe(
      '8e03978e-40d5-43e8-bc93-6894a57f9324',
    )
    expect(validateKey('!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~')).toBe(
      '!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~',
    )
  })

  it.each(invalidKeys)('rejects %s with 400 KEY_INVALID', (_, key) => {
    expect(() => validateKey(key)).toThrow(
      expect.objectContaining({ code: 'KEY_INVALID', status: 400 }),
    )
  })

  it('never echoes the rejected key in the message', () => {
    const error = (() => {
      try {
        validateKey('secret value')
      } catch (e) {
        return e as Error
      }
    })()
    expect(error?.message).not.toContain('secret')
  })

  it.each(invalidKeys)('the engine rejects %s before the store is called', async (_, key) => {
    const store = createMemoryStore()
    const claim = vi.spyOn(store, 'claim')
    const handler = vi.fn()
    const idempotency = createIdempotency({ store })
    await expect(
      idempotency.execute({ key: key as string, operation: 'orders.create' }, handler),
    ).rejects.toMatchObject({ code: 'KEY_INVALID', status: 400 })
    expect(claim).not.toHaveBeenCalled()
    expect(handler).not.toHaveBeenCalled()
  })
})

describe('the Idempotency-Key header', () => {
  it('reads the IETF form, a quoted structured-field string', () => {
    expect(parseKeyHeader('"8e03978e-40d5"')).toBe('8e03978e-40d5')
    expect(parseKeyHeader('  "abc"  ')).toBe('abc')
  })

  it('reads a bare token', () => {
    expect(parseKeyHeader('abc')).toBe('abc')
    expect(parseKeyHeader('a,b')).toBe('a,b')
  })

  it('treats an absent header as no key', () => {
    expect(parseKeyHeader(undefined)).toBeUndefined()
    expect(parseKeyHeader(null)).toBeUndefined()
    expect(parseKeyHeader([])).toBeUndefined()
  })

  it.each([
    ['an empty value', ''],
    ['a list of two keys', 'a, b'],
    ['a list of two quoted keys', '"a", "b"'],
    ['a quoted key with a space', '"a b"'],
    ['an unterminated quote', '"abc'],
    ['a structured-field token instead of a string', '"abc";x=1 junk'],
  ])('rejects %s with KEY_INVALID', (_, value) => {
    expect(() => parseKeyHeader(value)).toThrow(expect.objectContaining({ code: 'KEY_INVALID' }))
  })

  it('rejects a header sent twice with two keys, as an array or as the joined list', () => {
    expect(() => parseKeyHeader(['a', 'b'])).toThrow(/more than once/)
    expect(() => parseKeyHeader('a, b')).toThrow(/more than once/)
    const headers = new Headers()
    headers.append('Idempotency-Key', 'a')
    headers.append('Idempotency-Key', 'b')
    expect(() => readKeyHeader(headers)).toThrow(/more than once/)
  })

  it('reads a header repeated with one key as that key', () => {
    expect(parseKeyHeader(['a', '"a"'])).toBe('a')
    expect(parseKeyHeader('a, a')).toBe('a')
  })

  it('finds the header case-insensitively in Fetch Headers and Node header objects', () => {
    expect(readKeyHeader(new Headers({ 'idempotency-key': '"abc"' }))).toBe('abc')
    expect(readKeyHeader({ 'idempotency-key': 'abc' })).toBe('abc')
    expect(readKeyHeader({ 'Idempotency-Key': ['abc', 'abc'] })).toBe('abc')
    expect(readKeyHeader({ 'content-type': 'application/json' })).toBeUndefined()
    expect(readKeyHeader(undefined)).toBeUndefined()
  })
})

describe('keys in inputs and from several sources', () => {
  it('splits the key field out of the input so it is not part of the payload', () => {
    expect(splitInputKey({ idempotencyKey: 'k', amount: 5 })).toEqual({
      key: 'k',
      payload: { amount: 5 },
    })
    expect(splitInputKey({ key: 'k', amount: 5 }, 'key')).toEqual({
      key: 'k',
      payload: { amount: 5 },
    })
    expect(splitInputKey({ amount: 5 })).toEqual({ key: undefined, payload: { amount: 5 } })
    expect(splitInputKey('text')).toEqual({ key: undefined, payload: 'text' })
    expect(() => splitInputKey({ idempotencyKey: '' })).toThrow(
      expect.objectContaining({ code: 'KEY_INVALID' }),
    )
  })

  it('agrees on one key from several sources, and rejects two different ones', () => {
    expect(agreeOnKey(undefined, 'k', 'k')).toBe('k')
    expect(agreeOnKey(undefined, undefined)).toBeUndefined()
    expect(() => agreeOnKey('a', 'b')).toThrow(expect.objectContaining({ code: 'KEY_INVALID' }))
  })
})
