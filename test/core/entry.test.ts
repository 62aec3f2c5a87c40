import { describe, expect, it } from 'vitest'
import * as root from '../../src'

describe('the root entry', () => {
  it('exports no adapter plumbing: adapters import it from the source modules', () => {
    const plumbing = [
      'agreeOnKey',
      'assertTransactionalStore',
      'callerScope',
      'defaultKeyField',
      'idempotencyKeyHeader',
      'parseKeyHeader',
      'splitInputKey',
      'toMilliseconds',
      'unkeyedContext',
      'validateKey',
    ]
    expect(Object.keys(root).filter((name) => plumbing.includes(name))).toEqual([])
  })

  it('exports the defaults of the engine as values, frozen', () => {
    expect(root.defaultIdempotencyOptions).toMatchObject({
      ttl: '24h',
      storeErrors: root.defaultStoreErrors,
      codec: root.defaultCodec,
      logger: root.defaultLogger,
      replayCache: root.defaultReplayCacheOptions,
    })
    expect(Object.isFrozen(root.defaultIdempotencyOptions)).toBe(true)
  })
})
