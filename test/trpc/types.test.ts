import {
  type inferProcedureBuilderResolverOptions,
  type inferProcedureInput,
  type inferProcedureOutput,
  initTRPC,
} from '@trpc/server'
import { describe, expectTypeOf, it } from 'vitest'
import { z } from 'zod'
import {
  createIdempotencyMiddleware,
  createIdempotencyPlugin,
  type IdempotencyMeta,
} from '../../adapters/trpc'
import { createIdempotency, createMemoryStore } from '../../src'

// These assertions are checked by `tsc --noEmit` (the tests also run them, as no-ops).
interface Context {
  req?: Request
  resHeaders?: Headers
  user?: { id: string }
}
const t = initTRPC.context<Context>().meta<IdempotencyMeta>().create()
const idempotency = createIdempotency({ store: createMemoryStore() })
const input = z.object({ amount: z.number().default(1), idempotencyKey: z.string().optional() })
const resolve = ({ input }: { input: { amount: number } }) => ({ at: new Date(), input })

describe('types', () => {
  it('keeps the procedure context, and types ctx in `scope` from the procedure', () => {
    type Before = inferProcedureBuilderResolverOptions<typeof t.procedure>['ctx']
    const idempotent = t.procedure.use(
      createIdempotencyMiddleware({
        idempotency,
        scope: ({ ctx }) => {
          expectTypeOf(ctx).toEqualTypeOf<Before>()
          return ctx.user?.id
        },
      }),
    )
    type After = inferProcedureBuilderResolverOptions<typeof idempotent>['ctx']
    expectTypeOf<After>().toEqualTypeOf<Before>()
  })

  it('sees the context added by an earlier middleware', () => {
    const authed = t.procedure.use(({ ctx, next }) =>
      next({ ctx: { user: ctx.user ?? { id: 'anonymous' } } }),
    )
    const idempotent = authed.use(
      createIdempotencyMiddleware({ idempotency, scope: ({ ctx }) => ctx.user.id }),
    )
    type After = inferProcedureBuilderResolverOptions<typeof idempotent>['ctx']
    expectTypeOf<After['user']>().toEqualTypeOf<{ id: string }>()
  })

  it('keeps the input and output types of the procedure', () => {
    const plain = t.procedure.input(input).mutation(resolve)
    const idempotent = t.procedure
      .use(createIdempotencyMiddleware({ idempotency }))
      .input(input)
      .mutation(resolve)
    expectTypeOf<inferProcedureInput<typeof idempotent>>().toEqualTypeOf<
      inferProcedureInput<typeof plain>
    >()
    expectTypeOf<inferProcedureOutput<typeof idempotent>>().toEqualTypeOf<
      inferProcedureOutput<typeof plain>
    >()
    expectTypeOf<inferProcedureInput<typeof idempotent>>().toEqualTypeOf<{
      amount?: number | undefined
      idempotencyKey?: string | undefined
    }>()
  })

  it('types the meta options', () => {
    t.procedure.meta({ idempotency: { required: true, ttl: '1h', lockTimeout: 30_000 } })
    // @ts-expect-error a duration is milliseconds or a number with a unit
    t.procedure.meta({ idempotency: { ttl: 'an hour' } })
    // @ts-expect-error unknown settings are refused
    t.procedure.meta({ idempotency: { retries: 3 } })
  })

  it('lets the plugin join a procedure whose context extends the one it reads', () => {
    const plugin = createIdempotencyPlugin<{ user?: { id: string } }>({
      idempotency,
      scope: ({ ctx }) => ctx.user?.id,
    })
    const joined = t.procedure.concat(plugin.procedure)
    type After = inferProcedureBuilderResolverOptions<typeof joined>['ctx']
    expectTypeOf<After['req']>().toEqualTypeOf<Request | undefined>()
    expectTypeOf<After['user']>().toEqualTypeOf<{ id: string } | undefined>()
  })
})
