import { describe, expect, it } from 'vitest'
import { idempotencyContext, withIdempotency } from '../../adapters/fetch'
import { insertOrder, usePglite } from '../transactional/fixtures'

describe('plain HTTP routes in transactional mode, on PGlite', () => {
  const lite = usePglite('im_tx_http')

  /** A route that writes its order through the lease's transaction, then answers `status`. */
  const route = (status: number) =>
    withIdempotency(
      async (request: Request) => {
        const { ref } = (await request.json()) as { ref: string }
        await insertOrder(idempotencyContext(request)?.tx, lite.orders, ref, 'book')
        return Response.json({ ref }, { status })
      },
      { idempotency: lite.engine() },
    )
  const post = (handler: ReturnType<typeof route>, key: string) =>
    handler(
      new Request('http://app.test/orders', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify({ ref: key }),
      }),
    )

  it('commits the route’s write with its record: a retry replays it and the row exists once', async () => {
    const handler = route(201)
    const key = lite.newKey('http-commit')
    const first = await post(handler, key)
    const retry = await post(handler, key)
    expect(retry.headers.get('idempotent-replay')).toBe('true')
    expect(await retry.text()).toBe(await first.text())
    expect(await lite.orderCount(key)).toBe(1)
  })

  it('rolls the route’s write back with a 5xx answer: nothing is recorded and the retry runs again', async () => {
    const handler = route(503)
    const key = lite.newKey('http-rollback')
    expect((await post(handler, key)).status).toBe(503)
    expect(await lite.orderCount(key)).toBe(0)
    const retry = await post(handler, key)
    expect(retry.headers.get('idempotent-replay')).toBeNull()
    expect(await lite.orderCount(key)).toBe(0)
  })
})
