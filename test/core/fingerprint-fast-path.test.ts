import { createHash } from 'node:crypto'
import fc from 'fast-check'
import { configure } from 'safe-stable-stringify'
import { describe, expect, it } from 'vitest'
import { fingerprint } from '../../src'

// The general path's text for plain JSON without `$` keys: sorted keys, nothing tagged.
const sortedJson = configure({ deterministic: true })
const expected = (value: unknown) =>
  createHash('sha256')
    .update(sortedJson(value) ?? 'null')
    .digest('base64url')

function hasDollarKey(value: unknown): boolean {
  if (value === null || typeof value !== 'object') return false
  if (Array.isArray(value)) return value.some(hasDollarKey)
  return Object.entries(value).some(([key, item]) => key.startsWith('$') || hasDollarKey(item))
}

/** The same value with every object's keys inserted in another order. */
function reversedKeys(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value
  if (Array.isArray(value)) return value.map(reversedKeys)
  return Object.fromEntries(
    Object.entries(value)
      .reverse()
      .map(([key, item]) => [key, reversedKeys(item)]),
  )
}

describe('fingerprint of plain JSON payloads', () => {
  it('hashes the same sorted-key JSON text the general path writes, whatever the key order', () => {
    fc.assert(
      fc.property(
        fc.jsonValue().filter((value) => !hasDollarKey(value)),
        (value) => {
          expect(fingerprint(value)).toBe(expected(value))
          expect(fingerprint(reversedKeys(value))).toBe(expected(value))
        },
      ),
      { numRuns: 300 },
    )
  })

  it('escapes strings as JSON does: quotes, backslashes, control characters, lone surrogates', () => {
    // 'binary' units draw any UTF-16 code unit, lone surrogates and control characters included.
    fc.assert(
      fc.property(
        fc.jsonValue({ stringUnit: 'binary' }).filter((value) => !hasDollarKey(value)),
        (value) => {
          expect(fingerprint(value)).toBe(expected(value))
        },
      ),
      { numRuns: 300 },
    )
    for (const text of [
      '"',
      '\\',
      '\u0000',
      '\u001f',
      '\ud800',
      'a\udfffb',
      '😀',
      '\u2028',
      '\u007f',
    ]) {
      expect(fingerprint({ text })).toBe(expected({ text }))
    }
  })

  it('orders keys by UTF-16 code unit, for a few keys and for many', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.string({ unit: 'binary', maxLength: 4 }), { maxLength: 40 }),
        (keys) => {
          const value = Object.fromEntries(
            keys.filter((key) => !key.startsWith('$')).map((key, i) => [key, i]),
          )
          expect(fingerprint(value)).toBe(expected(value))
          expect(fingerprint(reversedKeys(value))).toBe(expected(value))
        },
      ),
      { numRuns: 300 },
    )
  })

  it('leaves out undefined members and writes the same text for repeated key names', () => {
    const withUndefined = { b: undefined, a: 1, c: [undefined, { z: 2, y: undefined }] }
    expect(fingerprint(withUndefined)).toBe(expected({ a: 1, c: [null, { z: 2 }] }))
    // Keys met before (quoted once and reused) still quote as JSON does.
    for (let i = 0; i < 3; i++) {
      expect(fingerprint({ 'quo"te': i, '': 'empty', 'line\u2028': true })).toBe(
        expected({ 'quo"te': i, '': 'empty', 'line\u2028': true }),
      )
    }
  })
})
