import { initTRPC } from '@trpc/server'
import { createSchema, createYoga } from 'graphql-yoga'
import { describe, expect, it, vi } from 'vitest'
import { z } from 'zod'
import { type IdempotencyContextFields, useIdempotency } from '../../adapters/envelop'
import { createIdempotencyMiddleware } from '../../adapters/trpc'
import { createIdempotency, createMemoryStore, type HandlerContext } from '../../src'

const refusal =
  /transactional mode, which needs a store that keeps records in your database transaction/

describe('transactional mode needs a store with transactions', () => {
  it('createIdempotency refuses transactional: true on the memory store at configuration time', () => {
    expect(() => createIdempotency({ store: createMemoryStore(), transactional: true })).toThrow(
      TypeError,
    )
    expect(() => createIdempotency({ store: createMemoryStore(), transactional: true })).toThrow(
      refusal,
    )
  })

  it('a transactional request on such a store fails before claiming, and nothing runs or is recorded', async () => {
    const store = createMemoryStore()
    const claim = vi.spyOn(store, 'claim')
    const handler = vi.fn(() => 'ran')
    const request = { key: 'k1', operation: 'orders.create', transactional: true } as const
    const call = createIdempotency({ store }).execute(request, handler)
    await expect(call).rejects.toThrow(refusal)
    expect(handler).not.toHaveBeenCalled()
    expect(claim).not.toHaveBeenCalled()
    expect(await store.get(JSON.stringify(['', 'orders.create']), 'k1')).toBeUndefined()
  })

  it('both adapters refuse transactional: true over a store without transactions', () => {
    const idempotency = createIdempotency({ store: createMemoryStore() })
    expect(() => createIdempotencyMiddleware({ idempotency, transactional: true })).toThrow(refusal)
    expect(() => useIdempotency({ idempotency, transactional: true })).toThrow(refusal)
  })

  it('rejectAfter is checked like every duration', () => {
    expect(() =>
      createIdempotency({ store: createMemoryStore(), rejectAfter: 'soon' as never }),
    ).toThrow(/rejectAfter/)
  })
})

describe('exposeContext without transactional mode', () => {
  it('tRPC: ctx.idempotency.deriveKey is stable per key; without a key it throws', async () => {
    const t = initTRPC.create()
    const idempotency = createIdempotency({ store: createMemoryStore() })
    const procedure = t.procedure.use(
      createIdempotencyMiddleware({ idempotency, exposeContext: true }),
    )
    const seen = vi.fn((context: HandlerContext) => context.deriveKey('payment'))
    const router = t.router({
      pay: procedure
        .input(z.object({ idempotencyKey: z.string().optional() }))
        .mutation(({ ctx }) => seen(ctx.idempotency)),
    })
    const caller = t.createCallerFactory(router)({})

    const first = await caller.pay({ idempotencyKey: 'k1' })
    const other = await caller.pay({ idempotencyKey: 'k2' })
    expect(first).toMatch(/^[\w-]{43}$/)
    expect(other).not.toBe(first)
    await expect(caller.pay({})).rejects.toThrow(/deriveKey needs a keyed operation/)
    expect(seen).toHaveBeenCalledTimes(3)
  })

  it('GraphQL: context.idempotency.deriveKey is there for keyed mutations only', async () => {
    const idempotency = createIdempotency({ store: createMemoryStore() })
    const yoga = createYoga({
      schema: createSchema<IdempotencyContextFields>({
        typeDefs: 'type Query { ok: Boolean } type Mutation { pay: String }',
        resolvers: { Mutation: { pay: (_, __, context) => context.idempotency?.deriveKey('pay') } },
      }),
      logging: false,
      plugins: [useIdempotency({ idempotency, exposeContext: true })],
    })
    const pay = async (headers: Record<string, string>) => {
      const response = await yoga.fetch('http://yoga/graphql', {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ query: 'mutation { pay }' }),
      })
      return response.json()
    }
    const keyed = await pay({ 'idempotency-key': 'k1' })
    expect(keyed.data.pay).toMatch(/^[\w-]{43}$/)
    const unkeyed = await pay({})
    expect(unkeyed.data).toEqual({ pay: null })
    expect(unkeyed.errors).toHaveLength(1)
  })
})
