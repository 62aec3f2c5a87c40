// An Express server with a retry-safe `POST /charges` route (`npm run example:express`): the
// same charge POSTed twice with one `Idempotency-Key` header makes one row; the second answer is
// a replay.
import express from 'express'
import { createIdempotency, type Idempotency } from 'idempotent-mutations'
import { createDrizzleStore } from 'idempotent-mutations/drizzle'
import { idempotency as expressIdempotency } from 'idempotent-mutations/express'
import * as payments from './payments'

export function createExpressApp(
  db: payments.Database,
  idempotency: Idempotency,
  observe?: payments.Observe,
) {
  const app = express()
  // Who is asking: in a real app, the authenticated user or tenant. Keys never cross users.
  const scope = (request: Request) => request.headers.get('x-user-id')
  // After the body parser: the parsed body is what the fingerprint reads.
  app.use(express.json(), expressIdempotency({ idempotency, scope, required: true }))
  app.post('/charges', async (req, res) => {
    await observe?.('charge')
    const { orderId, amount, currency } = req.body
    const row = { via: 'express', orderId: String(orderId), amount: Number(amount), currency }
    res.status(201).json((await db.insert(payments.charges).values(row).returning())[0])
  })
  app.get('/charges', async (_req, res) => {
    await observe?.('query')
    res.json(await db.select().from(payments.charges))
  })
  return app
}

if (payments.isMain(import.meta.url)) {
  const { db } = await payments.openPaymentsDatabase()
  const store = createDrizzleStore(db) // records live next to `charges`, in the same database
  await store.ensureTable()
  const app = createExpressApp(db, createIdempotency({ store, ttl: '24h' }))
  const server = app.listen(Number(process.env.PORT ?? 3003), '127.0.0.1', () => {
    const address = server.address()
    const port = typeof address === 'object' && address ? address.port : address
    console.log(`Express server listening on http://127.0.0.1:${port}`)
  })
}
