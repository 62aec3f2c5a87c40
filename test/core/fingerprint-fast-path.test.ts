import { createHash } from 'node:crypto'
import fc from 'fast-check'
import { configure } from 'safe-stable-stringify'
import { describe, expect, it } from 'vitest'
import { fingerprint } from '../../src'
import { canonicalText, canonicalTextWithoutRecursion } from '../../src/fingerprint'

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

describe('fingerprint of payloads nested deeper than the call stack', () => {
  // Values with `$` keys, non-finite numbers and undefined members and items: what the general
  // path escapes or drops, so the text without recursion must do the same.
  const plainValue = fc.letrec((tie) => ({
    value: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      fc.string(),
      fc.double(),
      fc.boolean(),
      fc.constant(null),
      fc.constant(undefined),
      fc.array(tie('value'), { maxLength: 4 }),
      fc.dictionary(
        fc.oneof(
          fc.string(),
          fc.string().map((key) => `$${key}`),
        ),
        tie('value'),
        {
          maxKeys: 4,
        },
      ),
    ),
  })).value

  it('writes, without recursion, the text the general path writes', () => {
    fc.assert(
      fc.property(plainValue, (value) => {
        expect(canonicalTextWithoutRecursion(value)).toBe(canonicalText(value))
      }),
      { numRuns: 500 },
    )
    for (const value of [
      { n: Number.NaN, i: [Number.POSITIVE_INFINITY, -0, undefined] },
      { $map: [['a', 1]], $$x: { $: null }, plain: 'y' },
      { b: undefined, a: [undefined, { z: 2, y: undefined }] },
      Object.assign(Object.create(null), { 'quo"te\u2028': '\ud800' }),
    ]) {
      expect(canonicalTextWithoutRecursion(value)).toBe(canonicalText(value))
    }
  })

  /** An array `depth` levels deep around `leaf`, as JSON.parse builds it (no recursion there). */
  const nested = (depth: number, leaf: string) =>
    JSON.parse(`${'[{"a":'.repeat(depth)}"${leaf}"${'}]'.repeat(depth)}`) as unknown

  it('fingerprints an input 50,000 levels deep, like any other', () => {
    const deep = nested(50_000, 'x')
    // The recursive path cannot: this is the case the fallback is for.
    expect(() => JSON.stringify(deep)).toThrow(RangeError)
    const print = fingerprint(deep)
    expect(print).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(fingerprint(nested(50_000, 'x'))).toBe(print)
    expect(fingerprint(nested(50_000, 'y'))).not.toBe(print)
    expect(fingerprint(nested(49_999, 'x'))).not.toBe(print)
  })

  it('still refuses a deep value with a cycle, or with what only the general path writes', () => {
    const cyclic = nested(50_000, 'x') as Record<string, unknown>[]
    let innermost = cyclic as unknown as { a: unknown }[]
    while (Array.isArray(innermost[0]?.a)) innermost = innermost[0]!.a as { a: unknown }[]
    innermost[0]!.a = cyclic
    expect(() => fingerprint(cyclic)).toThrow()
    let withMap: unknown = new Map([['k', 1]])
    for (let i = 0; i < 50_000; i++) withMap = [withMap]
    expect(() => fingerprint(withMap)).toThrow(RangeError)
  })
})
