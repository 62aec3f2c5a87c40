import { describe, expect, it } from 'vitest'
import { createIdempotency, createMemoryStore, parseStoredScope, storedScope } from '../../src'

describe('storedScope', () => {
  it.each([
    ['a caller scope', 'tenant-1'],
    ['no caller scope', undefined],
  ])('names the scope the engine stores a record under, with %s', async (_, scope) => {
    const store = createMemoryStore()
    const idempotency = createIdempotency({ store })
    await idempotency.execute({ key: 'k-1', scope, operation: 'orders.create' }, async () => 1)
    const stored = storedScope({ scope, operation: 'orders.create' })
    expect(await store.inspect(stored, 'k-1')).toMatchObject({ status: 'completed' })
    expect(parseStoredScope(stored)).toEqual({ scope: scope ?? '', operation: 'orders.create' })
  })

  it('parseStoredScope answers undefined for a scope the engine did not make', () => {
    for (const stored of ['tenant', '["a"]', '["a",1]', '{"a":"b"}', '["a","b","c"]']) {
      expect(parseStoredScope(stored)).toBeUndefined()
    }
  })
})
