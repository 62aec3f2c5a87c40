import { getTRPCErrorShape, initTRPC, TRPCError } from '@trpc/server'
import { describe, expect, it, vi } from 'vitest'
import { z } from 'zod'
import {
  createIdempotencyMiddleware,
  createIdempotencyPlugin,
  type IdempotencyMeta,
} from '../../adapters/trpc'
import { createIdempotency, createMemoryStore, IdempotencyError } from '../../src'
import { type AppOptions, type Context, createApp, serve, settle } from './fixtures'

const keyOnly = z.object({ idempotencyKey: z.string().optional() })

/** A server-side caller: no HTTP, so no header; the key travels in the input. */
function callerFor(options: AppOptions = {}, ctx: Context = { user: 'alice' }) {
  const app = createApp(options)
  return { app, caller: app.t.createCallerFactory(app.router)(ctx) }
}

describe('createCaller (no HTTP request)', () => {
  it('runs a mutation keyed by its input field once and replays Dates, Maps and BigInts intact', async () => {
    const { app, caller } = callerFor()
    const first = await caller.order.rich({ name: 'pen', idempotencyKey: 'c-1' })
    const retry = await caller.order.rich({ name: 'pen', idempotencyKey: 'c-1' })
    expect(app.spies.rich).toHaveBeenCalledTimes(1)
    expect(retry).toEqual(first)
    expect(retry.at).toBeInstanceOf(Date)
    expect(retry.tags).toEqual(new Map([['vip', 1n]]))
    expect(retry.big).toBe(2n ** 70n)
    expect(Object.hasOwn(retry, 'nothing')).toBe(true)
  })

  it('leaves the key field out of the fingerprint, so only the rest of the input is compared', async () => {
    const { app, caller } = callerFor()
    await caller.order.create({ name: 'pen', idempotencyKey: 'c-2' })
    const reused = await caller.order.create({ name: 'ink', idempotencyKey: 'c-2' }).catch((e) => e)
    expect(reused).toBeInstanceOf(TRPCError)
    expect(reused.cause).toMatchObject({ code: 'KEY_REUSED' })
    expect(app.spies.create).toHaveBeenCalledTimes(1)
  })

  it('rejects a required mutation without an input key with BAD_REQUEST caused by KEY_REQUIRED', async () => {
    const { app, caller } = callerFor()
    const error = await caller.order.strict().catch((e) => e)
    expect(error).toMatchObject({ code: 'BAD_REQUEST' })
    expect(error.cause).toBeInstanceOf(IdempotencyError)
    expect(error.cause).toMatchObject({ code: 'KEY_REQUIRED', status: 400 })
    expect(app.spies.create).not.toHaveBeenCalled()
  })

  it.each([
    ['contains a space', 'two words'],
    ['is empty', ''],
    ['is longer than 255 characters', 'k'.repeat(256)],
  ])(
    'rejects an input key that %s with BAD_REQUEST KEY_INVALID and claims nothing',
    async (_, key) => {
      const { app, caller } = callerFor()
      const claim = vi.spyOn(app.store, 'claim')
      const error = await caller.order.create({ name: 'pen', idempotencyKey: key }).catch((e) => e)
      expect(error).toMatchObject({ code: 'BAD_REQUEST', cause: { code: 'KEY_INVALID' } })
      expect(claim).not.toHaveBeenCalled()
      expect(app.spies.create).not.toHaveBeenCalled()
    },
  )
})

describe('middleware options', () => {
  it('reads the key from a renamed field with `keyField`', async () => {
    const { app, caller } = callerFor({ middleware: { keyField: 'requestId' } })
    const input = { name: 'pen', requestId: 'o-1' } as { name: string }
    await caller.order.create(input)
    await caller.order.create(input)
    expect(app.spies.create).toHaveBeenCalledTimes(1)
  })

  it('finds the key with `getKey` alone, ignoring the input field', async () => {
    const { app, caller } = callerFor({
      middleware: { getKey: ({ input }) => `by-name-${(input as { name: string }).name}` },
    })
    await caller.order.create({ name: 'pen', idempotencyKey: 'ignored-1' })
    await caller.order.create({ name: 'pen', idempotencyKey: 'ignored-2' })
    expect(app.spies.create).toHaveBeenCalledTimes(1)
  })

  it('awaits an async scope, so two tenants with one key both run', async () => {
    const options: AppOptions = {
      middleware: { scope: async ({ ctx }) => `tenant:${ctx.user}` },
    }
    const app = createApp(options)
    const callerOf = app.t.createCallerFactory(app.router)
    await callerOf({ user: 'a' }).order.create({ name: 'pen', idempotencyKey: 'o-2' })
    await callerOf({ user: 'b' }).order.create({ name: 'pen', idempotencyKey: 'o-2' })
    await callerOf({ user: 'a' }).order.create({ name: 'pen', idempotencyKey: 'o-2' })
    expect(app.spies.create).toHaveBeenCalledTimes(2)
  })

  it('fails the call when the scope function throws, and never claims the key', async () => {
    const { app, caller } = callerFor({
      middleware: {
        scope: () => {
          throw new TRPCError({ code: 'UNAUTHORIZED', message: 'who are you?' })
        },
      },
    })
    const claim = vi.spyOn(app.store, 'claim')
    const error = await caller.order.create({ name: 'pen', idempotencyKey: 'o-3' }).catch((e) => e)
    expect(error).toMatchObject({ code: 'UNAUTHORIZED', message: 'who are you?' })
    expect(claim).not.toHaveBeenCalled()
    expect(app.spies.create).not.toHaveBeenCalled()
  })

  it('refuses a scope that is neither a string nor a number, so two tenants never share "[object Object]"', async () => {
    const { app, caller } = callerFor({
      middleware: { scope: (({ ctx }: { ctx: Context }) => ({ id: ctx.user })) as never },
    })
    const claim = vi.spyOn(app.store, 'claim')
    const error = await caller.order.create({ name: 'pen', idempotencyKey: 'o-9' }).catch((e) => e)
    expect(error.cause).toBeInstanceOf(TypeError)
    expect(error.cause.message).toMatch(/must return a string, a number or undefined/)
    expect(claim).not.toHaveBeenCalled()
    expect(app.spies.create).not.toHaveBeenCalled()
  })

  it('records only the failures `storeErrors` accepts', async () => {
    const { app, caller } = callerFor({
      middleware: { storeErrors: (error) => error.code === 'INTERNAL_SERVER_ERROR' },
    })
    const crash = () => caller.order.crash({ name: 'pen', idempotencyKey: 'o-4' }).catch((e) => e)
    const reject = () => caller.order.reject({ name: 'pen', idempotencyKey: 'o-5' }).catch((e) => e)
    const [crashed, crashedAgain] = [await crash(), await crash()]
    await reject()
    await reject()
    expect(app.spies.crash).toHaveBeenCalledTimes(1)
    expect(crashedAgain).toMatchObject({ code: 'INTERNAL_SERVER_ERROR', message: crashed.message })
    expect(app.spies.reject).toHaveBeenCalledTimes(2)
  })

  it("expires a record after the procedure's meta ttl, then runs the mutation again", async () => {
    let clock = Date.parse('2024-01-01T00:00:00Z')
    const now = () => clock
    const { app, caller } = callerFor({ store: createMemoryStore({ now }), engine: { now } })
    await caller.order.strict({ name: 'pen', idempotencyKey: 'o-6' })
    clock += 59 * 60_000
    await caller.order.strict({ name: 'pen', idempotencyKey: 'o-6' })
    expect(app.spies.create).toHaveBeenCalledTimes(1)
    clock += 2 * 60_000 // past the meta's ttl of 1 h (the engine's default is 24 h)
    await caller.order.strict({ name: 'pen', idempotencyKey: 'o-6' })
    expect(app.spies.create).toHaveBeenCalledTimes(2)
  })

  it('without `root`, replays a recorded error with its code, message and cause name, formatted again', async () => {
    const app = createApp({ middleware: { root: undefined } })
    const server = await serve(app, 'fetch')
    try {
      const call = () =>
        settle(server.client.order.create.mutate({ name: 'ab' }, { context: { key: 'o-7' } }))
      const first = await call()
      const retry = await call()
      expect(first).toMatchObject({
        ok: false,
        data: { code: 'BAD_REQUEST', causeName: 'ZodError' },
      })
      expect(retry).toMatchObject({
        ok: false,
        message: first.ok ? undefined : first.message,
        data: { code: 'BAD_REQUEST', httpStatus: 400, causeName: 'ZodError' },
      })
      expect(server.responses.at(-1)?.replay).toBe('true')
    } finally {
      await server.close()
    }
  })

  it("replays the exact shape a procedure's own `.errors()` formatter produced", async () => {
    const app = createApp({ middleware: { root: undefined } })
    let formatted = 0
    const router = app.t.router({
      counted: app.t.procedure
        .use(createIdempotencyMiddleware({ idempotency: app.idempotency }))
        .errors(({ shape }) => ({ ...shape, data: { ...shape.data, formatted: ++formatted } }))
        .input(keyOnly)
        .mutation(() => app.spies.reject('pen')),
    })
    const caller = app.t.createCallerFactory(router)({})
    const shapeOf = (error: TRPCError) =>
      getTRPCErrorShape({
        config: app.t._config,
        error,
        type: 'mutation',
        path: 'counted',
        input: undefined,
        ctx: {},
      })
    const first = await caller.counted({ idempotencyKey: 'o-8' }).catch(shapeOf)
    const retry = await caller.counted({ idempotencyKey: 'o-8' }).catch(shapeOf)
    expect(first).toMatchObject({ message: 'no orders for pen', data: { formatted: 1 } })
    expect(retry).toEqual(first)
    expect(app.spies.reject).toHaveBeenCalledTimes(1)
  })

  it("releases the key when storeErrors throws, logs it through the engine's logger, and the caller gets the procedure's own error", async () => {
    const logger = { warn: vi.fn(), error: vi.fn() }
    // The engine's logger, as the engine exposes it to adapters.
    const idempotency = Object.assign(createIdempotency({ store: createMemoryStore(), logger }), {
      logger,
    })
    const t = initTRPC.create()
    const reject = vi.fn((): never => {
      throw new TRPCError({ code: 'BAD_REQUEST', message: 'no orders for pen' })
    })
    const storeErrors = () => {
      throw new Error('the policy broke')
    }
    const router = t.router({
      reject: t.procedure
        .use(createIdempotencyMiddleware({ idempotency, storeErrors }))
        .input(keyOnly)
        .mutation(reject),
    })
    const caller = t.createCallerFactory(router)({})
    for (let call = 0; call < 2; call++) {
      await expect(caller.reject({ idempotencyKey: 'o-9' })).rejects.toMatchObject({
        code: 'BAD_REQUEST',
        message: 'no orders for pen',
      })
    }
    expect(reject).toHaveBeenCalledTimes(2)
    expect(logger.error).toHaveBeenCalledWith(
      'storeErrors threw; the key is released',
      expect.objectContaining({ message: 'the policy broke' }),
    )
  })
})

describe('createIdempotencyPlugin', () => {
  it('joins a procedure with .concat() and makes its mutations run once per key', async () => {
    const t = initTRPC.context<Context>().meta<IdempotencyMeta>().create()
    const idempotency = createIdempotency({ store: createMemoryStore() })
    const plugin = createIdempotencyPlugin<Context>({ idempotency, scope: ({ ctx }) => ctx.user })
    const resolver = vi.fn(() => ({ at: new Date(0) }))
    const router = t.router({
      pay: t.procedure
        .concat(plugin.procedure)
        .meta({ idempotency: { required: true } })
        .input(keyOnly.optional())
        .mutation(resolver),
    })
    const caller = t.createCallerFactory(router)({ user: 'a' })
    const input = { idempotencyKey: 'p-1' }
    expect(await caller.pay(input)).toEqual(await caller.pay(input))
    expect(resolver).toHaveBeenCalledTimes(1)
    await expect(caller.pay()).rejects.toMatchObject({ cause: { code: 'KEY_REQUIRED' } })
  })
})
