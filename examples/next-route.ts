// A Next.js route handler (app/api/charges/route.ts) made retry-safe with `withIdempotency`:
// the same charge POSTed twice with one `Idempotency-Key` header runs once; the second answer
// is a replay with `Idempotent-Replay: true`.
import { createIdempotency, createMemoryStore } from 'idempotent-mutations'
import { withIdempotency } from 'idempotent-mutations/fetch'

// In an app: createDrizzleStore(db) over the app's own database (see the README).
const idempotency = createIdempotency({ store: createMemoryStore() })
const charges: { orderId: string; amount: number }[] = []

async function createCharge(request: Request): Promise<Response> {
  const { orderId, amount } = (await request.json()) as { orderId: string; amount: number }
  charges.push({ orderId, amount })
  return Response.json({ id: charges.length, orderId, amount }, { status: 201 })
}

export const POST = withIdempotency(createCharge, {
  idempotency,
  scope: (request) => request.headers.get('x-user-id'),
  required: true,
})
