// A Hono server with a retry-safe `POST /charges` route (`npm run example:hono`): the same charge
// POSTed twice with one `Idempotency-Key` header makes one row; the second answer is a replay.
import { createServer } from 'node:http'
import { getRequestListener } from '@hono/node-server'
import { Hono } from 'hono'
import { createIdempotency } from 'idempotent-mutations'
import { createDrizzleStore } from 'idempotent-mutations/drizzle'
import { idempotency } from 'idempotent-mutations/hono'
import * as payments from './payments'

export function createHonoApp(
  db: payments.Database,
  engine: ReturnType<typeof createIdempotency>,
  observe?: payments.Observe,
) {
  const app = new Hono()
  // Who is asking: in a real app, the authenticated user or tenant. Keys never cross users.
  const scope = (request: Request) => request.headers.get('x-user-id')
  app.use('/charges', idempotency({ idempotency: engine, scope, required: true }))
  app.post('/charges', async (c) => {
    await observe?.('charge')
    const { orderId, amount, currency } = await c.req.json()
    const row = { via: 'hono', orderId: String(orderId), amount: Number(amount), currency }
    return c.json((await db.insert(payments.charges).values(row).returning())[0], 201)
  })
  app.get('/charges', async (c) => {
    await observe?.('query')
    return c.json(await db.select().from(payments.charges))
  })
  return app
}

if (payments.isMain(import.meta.url)) {
  const { db } = await payments.openPaymentsDatabase()
  const store = createDrizzleStore(db) // records live next to `charges`, in the same database
  await store.ensureTable()
  const app = createHonoApp(db, createIdempotency({ store, ttl: '24h' }))
  const url = await payments.listen(createServer(getRequestListener(app.fetch)), 3002)
  console.log(`Hono server listening on ${url}`)
}
