import { PGlite } from '@electric-sql/pglite'
import { drizzle } from 'drizzle-orm/pglite'
import { Hono } from 'hono'
import { Webhook } from 'standardwebhooks'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { idempotency } from '../../adapters/hono'
import { createIdempotency } from '../../src'
import { useTestTables } from '../stores/drizzle-fixtures'
import { gate } from './fixtures'

const client = new PGlite()
const db = drizzle({ client })
// Registered first, so it runs last: the test tables' own clean-up needs the client.
afterAll(() => client.close())
const tables = useTestTables(() => db, 'im_test_webhooks')
const secret = `whsec_${Buffer.from('a webhook secret of the test').toString('base64')}`
beforeAll(() => client.exec('create table payments_received (event_id text, amount int)'))

/** A Standard Webhooks receiver: the signature checked, then the event written once. */
async function receiver() {
  const engine = createIdempotency({ store: await tables.createStore() })
  const hold = { gate: undefined as ReturnType<typeof gate> | undefined, arrived: gate() }
  const app = new Hono()
  app.use('/webhooks/*', idempotency({ idempotency: engine, key: 'webhook-id' }))
  app.post('/webhooks/payments', async (c) => {
    const body = await c.req.text()
    try {
      new Webhook(secret).verify(body, Object.fromEntries(c.req.raw.headers))
    } catch {
      return c.json({ error: 'bad signature' }, 401)
    }
    const event = JSON.parse(body) as { id: string; data: { amount: number } }
    if (hold.gate) {
      hold.arrived.open()
      await hold.gate.opened
    }
    await client.query('insert into payments_received values ($1, $2)', [
      event.id,
      event.data.amount,
    ])
    return c.json({ received: event.id })
  })
  return { app, hold }
}

/** What a Standard Webhooks sender sends for one message: the same id and signature each time. */
function delivery(id: string, payload: object) {
  const body = JSON.stringify(payload)
  const timestamp = new Date()
  const headers = {
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)),
    'webhook-signature': new Webhook(secret).sign(id, timestamp, body),
  }
  return () => new Request('http://app.test/webhooks/payments', { method: 'POST', headers, body })
}

describe('a Standard Webhooks receiver behind the Hono middleware', () => {
  it('writes an event delivered three times, once concurrently, once; every delivery gets a 2xx or a 409', async () => {
    const { app, hold } = await receiver()
    const send = delivery('msg_2A1', { id: 'evt_1', data: { amount: 4200 } })
    hold.gate = gate()
    const first = app.fetch(send())
    await hold.arrived.opened
    const concurrent = await app.fetch(send())
    hold.gate.open()
    const statuses = [(await first).status, concurrent.status, (await app.fetch(send())).status]
    const rows = await client.query<{ n: number }>(
      "select count(*)::int as n from payments_received where event_id = 'evt_1'",
    )
    expect(rows.rows[0]?.n).toBe(1)
    expect(statuses).toEqual([200, 409, 200])
    expect(concurrent.headers.get('retry-after')).toMatch(/^\d+$/)
  })

  it('replays the 2xx to a redelivery, and runs a forged delivery with the same id as a new payload (422)', async () => {
    const { app } = await receiver()
    const send = delivery('msg_2A2', { id: 'evt_2', data: { amount: 100 } })
    const first = await app.fetch(send())
    const again = await app.fetch(send())
    expect(again.headers.get('idempotent-replay')).toBe('true')
    expect(await again.text()).toBe(await first.text())
    const forged = delivery('msg_2A2', { id: 'evt_2', data: { amount: 999 } })
    expect((await app.fetch(forged())).status).toBe(422)
    const rows = await client.query<{ amount: number }>(
      "select amount from payments_received where event_id = 'evt_2'",
    )
    expect(rows.rows).toEqual([{ amount: 100 }])
  })
})
