// A tRPC server with a retry-safe `charge` mutation (`npm run example:trpc`): the same charge
// POSTed twice with one `Idempotency-Key` header makes one row; the second answer is a replay.
import { initTRPC } from '@trpc/server'
import { type CreateHTTPContextOptions, createHTTPServer } from '@trpc/server/adapters/standalone'
import { createIdempotency, type Idempotency } from 'idempotent-mutations'
import { createDrizzleStore } from 'idempotent-mutations/drizzle'
import type { IdempotencyMeta } from 'idempotent-mutations/trpc'
import { createIdempotencyMiddleware, getIdempotencyError } from 'idempotent-mutations/trpc'
import { z } from 'zod'
import * as payments from './payments'

// Who is asking: in a real app, the authenticated user or tenant. Keys never cross users.
const createContext = ({ req, res }: CreateHTTPContextOptions) => {
  return { req, res, userId: String(req.headers['x-user-id'] ?? 'anonymous') }
}
// Lets clients read the contract's code (KEY_REUSED, IN_PROGRESS, ...) from error.data.
const errorFormatter = ({ shape, error }: { shape: { data: object }; error: Error }) => {
  return { ...shape, data: { ...shape.data, idempotencyCode: getIdempotencyError(error)?.code } }
}
const t = initTRPC
  .context<typeof createContext>()
  .meta<IdempotencyMeta>()
  .create({ errorFormatter })
const Charge = z.object({ orderId: z.string(), amount: z.number().int(), currency: z.string() })
type Observe = payments.Observe

export function createTrpcServer(
  db: payments.Database,
  idempotency: Idempotency,
  observe?: Observe,
) {
  const scope = ({ ctx }: { ctx: { userId: string } }) => ctx.userId
  const idempotent = t.procedure.use(createIdempotencyMiddleware({ idempotency, scope }))
  const router = t.router({
    charge: idempotent
      .meta({ idempotency: { required: true } })
      .input(Charge)
      .mutation(async ({ input }) => {
        await observe?.('charge')
        const row = { via: 'trpc', ...input }
        return (await db.insert(payments.charges).values(row).returning())[0]
      }),
    charges: t.procedure.query(async () => {
      await observe?.('query')
      return db.select().from(payments.charges)
    }),
  })
  return createHTTPServer({ router, createContext })
}

if (payments.isMain(import.meta.url)) {
  const { db } = await payments.openPaymentsDatabase()
  const store = createDrizzleStore(db) // records live next to `charges`, in the same database
  await store.ensureTable()
  const idempotency = createIdempotency({ store, ttl: '24h' })
  const url = await payments.listen(createTrpcServer(db, idempotency), 3000)
  console.log(`tRPC server listening on ${url}`)
}
