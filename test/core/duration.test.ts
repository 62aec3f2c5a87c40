import { describe, expect, it } from 'vitest'
import { createIdempotency, createMemoryStore } from '../../src'
import { toMilliseconds } from '../../src/duration'

describe('durations', () => {
  it.each([
    [300, 300],
    [0, 0],
    ['300ms', 300],
    ['90s', 90_000],
    ['1.5s', 1_500],
    ['5m', 300_000],
    ['24h', 86_400_000],
    ['7d', 604_800_000],
  ])('reads %j as %d ms', (value, expected) => {
    expect(toMilliseconds(value as never)).toBe(expected)
  })

  it.each([
    '',
    '10',
    '1 h',
    '1w',
    '-5s',
    '5S',
    'abc',
    ' 5s',
    -1,
    Number.NaN,
    Number.POSITIVE_INFINITY,
    null,
  ])('rejects %j with a TypeError that names the option', (value) => {
    expect(() => toMilliseconds(value as never, 'lockTimeout')).toThrow(TypeError)
    expect(() => toMilliseconds(value as never, 'lockTimeout')).toThrow(/lockTimeout/)
  })

  it('the engine rejects a bad duration when it is created', () => {
    const store = createMemoryStore()
    expect(() => createIdempotency({ store, ttl: '1 day' as never })).toThrow(/ttl/)
    expect(() => createIdempotency({ store, waitTimeout: -1 })).toThrow(/waitTimeout/)
  })

  it('the engine rejects a bad per-call duration before the store is touched', async () => {
    const store = createMemoryStore()
    const idempotency = createIdempotency({ store })
    await expect(
      idempotency.execute({ key: 'k', operation: 'op', ttl: 'soon' as never }, () => 1),
    ).rejects.toThrow(TypeError)
    expect(await store.get(JSON.stringify(['', 'op']), 'k')).toBeUndefined()
  })
})
