import { type inferProcedureBuilderResolverOptions, initTRPC } from '@trpc/server'
import { drizzle } from 'drizzle-orm/postgres-js'
import { describe, expectTypeOf, it } from 'vitest'
import { createIdempotencyMiddleware } from '../../adapters/trpc'
import { createIdempotency, type HandlerContext } from '../../src'
import { createDrizzleStore, type DrizzleTransactionOf } from '../../src/stores/drizzle'

// Checked by `tsc --noEmit`; as tests they are no-ops. A mock database never connects.
const db = drizzle.mock()
type Transaction = DrizzleTransactionOf<typeof db>
const idempotency = createIdempotency({ store: createDrizzleStore(db), transactional: true })
const t = initTRPC.context<{ user?: string }>().create()

describe('transactional types', () => {
  it('the engine hands a transactional handler the database transaction type', () => {
    // Type-checked, never called: the mock database cannot run a transaction.
    const transactional = () =>
      idempotency.execute(
        { key: 'k', operation: 'orders.create', transactional: true },
        async ({ tx }) => {
          expectTypeOf(tx).toEqualTypeOf<Transaction>()
          return 1
        },
      )
    const unspecified = () =>
      idempotency.execute({ key: 'k', operation: 'orders.create' }, async ({ tx }) => {
        expectTypeOf(tx).toEqualTypeOf<Transaction | undefined>()
      })
    expectTypeOf(transactional).returns.resolves.toEqualTypeOf<{
      value: number
      replayed: boolean
    }>()
    expectTypeOf(unspecified).toBeFunction()
  })

  it('the transactional tRPC middleware types ctx.tx (or its configured name) and ctx.idempotency', () => {
    const transactional = t.procedure.use(
      createIdempotencyMiddleware({ idempotency, transactional: true }),
    )
    type Context = inferProcedureBuilderResolverOptions<typeof transactional>['ctx']
    expectTypeOf<Context['tx']>().toEqualTypeOf<Transaction>()
    expectTypeOf<Context['idempotency']>().toEqualTypeOf<HandlerContext<Transaction>>()
    expectTypeOf<Context['user']>().toEqualTypeOf<string | undefined>()

    const renamed = t.procedure.use(
      createIdempotencyMiddleware({ idempotency, transactional: true, transactionField: 'db' }),
    )
    expectTypeOf<
      inferProcedureBuilderResolverOptions<typeof renamed>['ctx']['db']
    >().toEqualTypeOf<Transaction>()
  })

  it('exposeContext alone types ctx.idempotency without a transaction', () => {
    const exposed = t.procedure.use(
      createIdempotencyMiddleware({ idempotency, exposeContext: true }),
    )
    type Context = inferProcedureBuilderResolverOptions<typeof exposed>['ctx']
    expectTypeOf<Context['idempotency']['deriveKey']>().toEqualTypeOf<(name: string) => string>()
    expectTypeOf<Context>().not.toHaveProperty('tx')
  })
})
