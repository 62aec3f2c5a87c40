import fc from 'fast-check'
import { describe, expect, it, vi } from 'vitest'
import { defaultCodec, fingerprint } from '../../src'
import { notPlainOk, plainOkValue } from '../../src/codec'
import { createHarness } from './fixtures'

const rich = () => ({
  at: new Date('2030-01-02T03:04:05.678Z'),
  amount: 12345678901234567890n,
  tags: new Set(['a', 'b']),
  byId: new Map<unknown, unknown>([
    [1, { nested: [new Date(0), undefined, null] }],
    ['two', new Map([['deep', new Set([1n])]])],
  ]),
  missing: undefined,
  list: [1, 'two', { three: [3] }],
  pattern: /ab+c/gi,
})

describe('the default codec', () => {
  it('round-trips Date, BigInt, Map, Set, undefined, RegExp and nested structures', () => {
    const value = rich()
    const decoded = defaultCodec.decode(defaultCodec.encode(value)) as ReturnType<typeof rich>
    expect(decoded).toEqual(value)
    expect(decoded.at).toBeInstanceOf(Date)
    expect(typeof decoded.amount).toBe('bigint')
    expect(decoded.byId.get('two')).toBeInstanceOf(Map)
    expect('missing' in decoded).toBe(true)
  })

  it('round-trips a cyclic value', () => {
    const value: { name: string; self?: unknown } = { name: 'loop' }
    value.self = value
    const decoded = defaultCodec.decode(defaultCodec.encode(value)) as typeof value
    expect(decoded.self).toBe(decoded)
  })

  it('a replay hands the caller the same rich value the first caller got', async () => {
    const { idempotency } = createHarness()
    const request = { key: 'k', operation: 'orders.create' }
    const first = await idempotency.execute(request, rich)
    const again = vi.fn(rich)
    const replay = await idempotency.execute(request, again)
    expect(replay.replayed).toBe(true)
    expect(again).not.toHaveBeenCalled()
    expect(replay.value).toEqual(first.value)
    expect(replay.value.byId.get(1)).toEqual({ nested: [new Date(0), undefined, null] })
  })
})

describe('decoding a recorded plain value (the replay fast path)', () => {
  const decodedValue = (text: string) => (defaultCodec.decode(text) as { value: unknown }).value

  it('parses the value of a plain successful outcome exactly as the codec decodes the whole text', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        let text: string
        try {
          text = defaultCodec.encode({ ok: true, value })
        } catch {
          return // superjson refuses keys such as `prototype`: such a response is not stored
        }
        const fast = plainOkValue(text)
        // Only a value superjson annotates (-0) goes to the codec.
        if (fast === notPlainOk) expect(text).toContain(',"meta":')
        else expect(fast).toStrictEqual(decodedValue(text))
      }),
      { numRuns: 300 },
    )
    // JSON.parse makes `__proto__` an own key on both paths.
    const text = '{"json":{"ok":true,"value":{"__proto__":{"a":1}}}}'
    expect(Object.keys(plainOkValue(text) as object)).toEqual(['__proto__'])
    expect(plainOkValue(text)).toStrictEqual(decodedValue(text))
  })

  it('leaves recorded errors, superjson meta and texts of another shape to the codec', () => {
    for (const text of [
      defaultCodec.encode({ ok: false, error: { name: 'Error', message: 'no' } }),
      defaultCodec.encode({ ok: true, value: new Date(0) }),
      defaultCodec.encode({ ok: true, value: { v: 1, at: undefined } }),
      defaultCodec.encode({ ok: true, value: rich() }),
      '{"json":{"ok":true,"value":1},"x":{"y":2}}',
      '{"json":{"ok":true,"value":}}',
      '{"json":{"ok":true,"valuf":1}}',
      '{}}',
    ]) {
      expect(plainOkValue(text)).toBe(notPlainOk)
    }
  })
})

describe('the payload fingerprint', () => {
  it('ignores object key order, at every depth', () => {
    expect(fingerprint({ a: 1, b: { c: [1, 2], d: 'x' } })).toBe(
      fingerprint({ b: { d: 'x', c: [1, 2] }, a: 1 }),
    )
  })

  it('is the same for no payload and null', () => {
    expect(fingerprint(undefined)).toBe(fingerprint(null))
  })

  it.each([
    ['a value', { amount: 1 }, { amount: 2 }],
    ['a type', { amount: 1 }, { amount: '1' }],
    ['array order', [1, 2], [2, 1]],
    ['an extra field', { a: 1 }, { a: 1, b: null }],
    ['a Map and an object with its entries', new Map([['a', 1]]), { a: 1 }],
    ['a Map and an object that looks like its tag', new Map([['a', 1]]), { $map: [['a', 1]] }],
    ['a Set and an array', new Set([1, 2]), [1, 2]],
    ['a BigInt and a number', 10n, 10],
    ['a BigInt and an object that looks like its tag', 10n, { $bigint: '10' }],
    ['a BigInt and its string', 10n, '10'],
  ])('changes with %s', (_, a, b) => {
    expect(fingerprint(a)).not.toBe(fingerprint(b))
  })

  it('is a fixed-length opaque string', () => {
    expect(fingerprint({ a: 'x'.repeat(10_000) })).toMatch(/^[A-Za-z0-9_-]{43}$/)
  })
})

describe('what the default codec reads back (README "Semantics")', () => {
  /** The outcome as a replay decodes it, or 'refused' when the codec will not record it. */
  const readBack = (value: unknown) => {
    let text: string
    try {
      text = defaultCodec.encode({ ok: true, value })
    } catch {
      return 'refused' as const
    }
    return (defaultCodec.decode(text) as { value: unknown }).value
  }

  it('keeps Buffers, typed arrays, ArrayBuffers and DataViews byte for byte', () => {
    const file = Buffer.from([0, 1, 254, 255])
    const floats = new Float32Array([Number.NaN, -0, 3.5])
    const view = new Uint16Array([1, 2, 3, 4]).subarray(1, 3)
    const decoded = readBack({
      file,
      floats,
      view,
      raw: new ArrayBuffer(3),
      big: new BigInt64Array([-5n]),
    }) as {
      file: Buffer
      floats: Float32Array
      view: Uint16Array
      raw: ArrayBuffer
      big: BigInt64Array
    }
    expect(Buffer.isBuffer(decoded.file) && decoded.file.equals(file)).toBe(true)
    expect(decoded.floats).toBeInstanceOf(Float32Array)
    expect(Buffer.from(decoded.floats.buffer).equals(Buffer.from(floats.buffer))).toBe(true)
    expect([...decoded.view]).toEqual([2, 3])
    expect(decoded.raw).toBeInstanceOf(ArrayBuffer)
    expect(decoded.raw.byteLength).toBe(3)
    expect([...decoded.big]).toEqual([-5n])
  })

  it('gives an error back its own enumerable fields in order, its name and message, and no stack frames', () => {
    class Declined extends Error {
      override name = 'Declined'
      readonly at = new Date(0)
      readonly amount = 12n
    }
    const plain = readBack(new Error('no')) as Error
    expect(plain).toBeInstanceOf(Error)
    expect(Object.keys(plain)).toEqual([])
    expect([plain.name, plain.message]).toEqual(['Error', 'no'])
    expect(JSON.stringify(plain)).toBe('{}')
    const declined = readBack(new Declined('card', { cause: 'limit' })) as Declined
    expect(Object.keys(declined)).toEqual(['name', 'at', 'amount'])
    expect(declined.at).toEqual(new Date(0))
    expect(declined.amount).toBe(12n)
    expect([declined.name, declined.message, declined.cause]).toEqual(['Declined', 'card', 'limit'])
    expect(declined.stack).toBe('Declined: card')
    const typeError = readBack(new TypeError('bad')) as Error
    expect([typeError.name, Object.keys(typeError)]).toEqual(['TypeError', []])
  })

  it('keeps undefined members, -0, NaN, Infinity, dates, big integers, maps and sets', () => {
    const value = {
      missing: undefined,
      zero: -0,
      nan: Number.NaN,
      inf: Number.NEGATIVE_INFINITY,
      at: new Date(5),
      big: 2n ** 80n,
      map: new Map([[{ id: 1 }, new Set([1n])]]),
    }
    expect(readBack(value)).toStrictEqual(value)
  })

  it('gives what JSON sends for a class instance, a sparse array, symbols and functions', () => {
    class Point {
      x = 1
      hidden = undefined
      toString() {
        return 'point'
      }
    }
    const symbol = Symbol('s')
    expect(readBack(new Point())).toStrictEqual({ x: 1 })
    // biome-ignore lint/suspicious/noSparseArray: the hole is the case
    expect(readBack([1, , 3])).toStrictEqual([1, null, 3])
    expect(
      readBack({ [symbol]: 1, value: symbol, list: [symbol, () => 1], run: () => 1 }),
    ).toStrictEqual({ list: [null, null] })
    expect(readBack(new Date(Number.NaN))).toBeNull()
  })

  it('refuses what it cannot read back faithfully', () => {
    const throwing = {
      get total(): number {
        throw new Error('not loaded')
      },
    }
    let reads = 0
    const shifting = {
      get count() {
        return ++reads
      },
      at: new Date(0),
    }
    class WithJson {
      at = new Date(0)
      toJSON() {
        return 'custom'
      }
    }
    const erroring = Object.assign(new Error('x'), { toJSON: () => 'custom' })
    // A symbol or function as the whole value reads back as undefined, which superjson sends
    // differently from the original.
    const topLevel = [Symbol('top'), () => 1]
    for (const value of [
      throwing,
      shifting,
      { __proto__: null, constructor: 1 },
      erroring,
      ...topLevel,
    ]) {
      expect(readBack(value)).toBe('refused')
    }
    // A class's toJSON is what the client is sent, and what is recorded.
    expect(readBack(new WithJson())).toBe('custom')
  })

  it('leaves the global superjson alone', async () => {
    const superjson = (await import('superjson')).default
    expect(() => superjson.parse(superjson.stringify(Buffer.from('x')))).toThrow(/typed array/)
  })
})
