import { envelop, type Plugin, useEngine, useMaskedErrors, useSchema } from '@envelop/core'
import { execute, parse, specifiedRules, subscribe, validate } from 'graphql'
import { describe, expect, it } from 'vitest'
import { type UseIdempotencyOptions, useIdempotency } from '../../adapters/envelop'
import { createIdempotency, createMemoryStore } from '../../src'
import { createTestSchema, spyOnStore } from './fixtures'

/**
 * A plain Envelop setup, no HTTP: the context is whatever the caller passes. `masking` says
 * where useMaskedErrors sits relative to useIdempotency.
 */
function setup(
  options: {
    masking?: 'before' | 'after'
    plugin?: Omit<UseIdempotencyOptions, 'idempotency'>
    /** Replaces graphql's execute (an executor that throws, say). */
    execute?: typeof execute
  } = {},
) {
  const { schema, resolvers } = createTestSchema()
  const store = spyOnStore(createMemoryStore())
  const idempotency = createIdempotency({ store })
  const plugin = useIdempotency({ idempotency, ...options.plugin })
  const masking = options.masking ?? 'before'
  const plugins: Plugin[] = [
    useEngine({ parse, validate, execute: options.execute ?? execute, subscribe, specifiedRules }),
    useSchema(schema),
    ...(masking === 'before' ? [useMaskedErrors(), plugin] : [plugin, useMaskedErrors()]),
  ]
  const getEnveloped = envelop({ plugins })
  async function run(source: string, context: Record<string, unknown> = {}) {
    const enveloped = getEnveloped(context)
    const document = enveloped.parse(source)
    expect(enveloped.validate(enveloped.schema, document)).toEqual([])
    const contextValue = await enveloped.contextFactory()
    return enveloped.execute({ schema: enveloped.schema, document, contextValue })
  }
  /** Envelop's execute as it answers: a result, or a promise of one. */
  function executeNow(source: string, context: Record<string, unknown> = {}) {
    const enveloped = getEnveloped(context)
    const document = enveloped.parse(source)
    return enveloped.execute({ schema: enveloped.schema, document, contextValue: context })
  }
  return { run, executeNow, resolvers, store }
}

describe('useIdempotency in plain Envelop (no HTTP request)', () => {
  const keyed = 'mutation { createOrder(item: "pen", idempotencyKey: "env-1") { id item } }'

  it('runs a mutation with an argument key once and replays its result', async () => {
    const { run, resolvers } = setup()
    const first = await run(keyed)
    const second = await run(keyed)
    expect(resolvers.createOrder).toHaveBeenCalledTimes(1)
    expect(first).toEqual({ data: { createOrder: { id: '1', item: 'pen' } } })
    expect(second).toEqual(first)
  })

  it('releases the key when the executor throws, so the retry runs instead of a 409', async () => {
    let failures = 1
    const { run, resolvers, store } = setup({
      execute: (args) => {
        if (failures-- > 0) throw new Error('the executor crashed')
        return execute(args)
      },
    })
    await expect(run(keyed)).rejects.toThrow('the executor crashed')
    expect(store.release).toHaveBeenCalledTimes(1)
    const retry = await run(keyed)
    expect(retry).toEqual({ data: { createOrder: { id: '1', item: 'pen' } } })
    expect(resolvers.createOrder).toHaveBeenCalledTimes(1)
  })

  it('reads the header from a Node-style context.req', async () => {
    const { run, resolvers } = setup()
    const source = 'mutation { createOrder(item: "pen") { id } }'
    const context = () => ({ req: { headers: { 'idempotency-key': 'node-1' } } })
    await run(source, context())
    await run(source, context())
    expect(resolvers.createOrder).toHaveBeenCalledTimes(1)
  })

  it('lets a mutation without a key through synchronously: no promise, no store call', async () => {
    const { executeNow, resolvers, store } = setup()
    // The resolvers are synchronous, so only a hook that answers with a promise makes one.
    const unkeyed = executeNow('mutation { createOrder(item: "desk") { id } }')
    expect(unkeyed).not.toBeInstanceOf(Promise)
    expect((unkeyed as { data: unknown }).data).toEqual({ createOrder: { id: expect.any(String) } })
    expect(store.claim).not.toHaveBeenCalled()
    // A key needs the store, which answers asynchronously.
    const keyed = executeNow('mutation { createOrder(item: "desk") { id } }', {
      req: { headers: { 'idempotency-key': 'sync-1' } },
    })
    expect(keyed).toBeInstanceOf(Promise)
    await keyed
    expect(store.claim).toHaveBeenCalledTimes(1)
    expect(resolvers.createOrder).toHaveBeenCalledTimes(2)
  })

  it('leaves queries untouched and never calls the store', async () => {
    const { run, resolvers, store } = setup()
    await run('{ orders { id } }', { req: { headers: { 'idempotency-key': 'q' } } })
    await run('{ orders { id } }', { req: { headers: { 'idempotency-key': 'q' } } })
    expect(resolvers.orders).toHaveBeenCalledTimes(2)
    expect(store.claim).not.toHaveBeenCalled()
  })

  it('answers a required field without a key with an IDEMPOTENCY_KEY_REQUIRED error result', async () => {
    const { run, resolvers } = setup()
    const result = await run('mutation { chargeCard(amount: 1) }')
    expect(result).toMatchObject({
      errors: [{ extensions: { code: 'IDEMPOTENCY_KEY_REQUIRED', http: { status: 400 } } }],
    })
    expect(resolvers.chargeCard).not.toHaveBeenCalled()
  })

  it('replays an expected error with the same message, path and locations', async () => {
    const { run, resolvers } = setup()
    const source = 'mutation {\n  rejectOrder(reason: "no") { id }\n}'
    const context = () => ({ req: { headers: { 'idempotency-key': 'rej-1' } } })
    const first = await run(source, context())
    const second = await run(source, context())
    expect(resolvers.rejectOrder).toHaveBeenCalledTimes(1)
    expect(JSON.stringify(second)).toBe(JSON.stringify(first))
    expect(second.errors?.[0]?.locations).toEqual([{ line: 2, column: 3 }])
  })

  it('releases the key for an unexpected error by default, whichever side the masker is on', async () => {
    for (const masking of ['before', 'after'] as const) {
      const { run, resolvers, store } = setup({ masking })
      const source = 'mutation { failUnexpectedly { id } }'
      const context = () => ({ req: { headers: { 'idempotency-key': `f-${masking}` } } })
      const first = await run(source, context())
      await run(source, context())
      expect(JSON.stringify(first)).toContain('Unexpected error.')
      expect(resolvers.failUnexpectedly).toHaveBeenCalledTimes(2)
      expect(store.complete).not.toHaveBeenCalled()
    }
  })

  it('records an unexpected error masked by a masker registered before it, never the raw one', async () => {
    const { run, resolvers } = setup({ masking: 'before', plugin: { storeErrors: () => true } })
    const source = 'mutation { failUnexpectedly { id } }'
    const context = () => ({ req: { headers: { 'idempotency-key': 'f-1' } } })
    const first = await run(source, context())
    const second = await run(source, context())
    expect(resolvers.failUnexpectedly).toHaveBeenCalledTimes(1)
    expect(JSON.stringify(second)).toBe(JSON.stringify(first))
    expect(JSON.stringify(second)).not.toContain('hunter2')
  })

  it('does not record an unexpected error it sees unmasked (masker registered after it)', async () => {
    const { run, resolvers, store } = setup({
      masking: 'after',
      plugin: { storeErrors: () => true },
    })
    const source = 'mutation { failUnexpectedly { id } }'
    const context = () => ({ req: { headers: { 'idempotency-key': 'f-2' } } })
    const first = await run(source, context())
    await run(source, context())
    expect(JSON.stringify(first)).not.toContain('hunter2')
    expect(resolvers.failUnexpectedly).toHaveBeenCalledTimes(2)
    expect(store.complete).not.toHaveBeenCalled()
  })
})
