import { describe, expect, it } from 'vitest'
import { createHttpApp, gate, json, transports } from './fixtures'
import { useHttpStores } from './store-kinds'

const stores = useHttpStores('http_races')

describe.each(stores)('plain HTTP routes on the $name store', ({ createStore, skip }) => {
  describe.skipIf(skip).each(transports)('through %s', (transport) => {
    const withStore = async () => createHttpApp(transport, { store: await createStore() })

    it('runs once when 50 concurrent deliveries of one key race; the others get 409 or the replay', async () => {
      const app = await withStore()
      app.hold.gate = gate()
      const deliveries = Array.from({ length: 50 }, () =>
        app.send('/payments', { key: 'k-race', ...json({ amount: 7 }) }),
      )
      await app.hold.arrived.opened
      app.hold.gate.open()
      const statuses = (await Promise.all(deliveries)).map((response) => response.status)
      expect(app.charges).toHaveLength(1)
      expect(statuses.filter((status) => status === 201).length).toBeGreaterThanOrEqual(1)
      expect(statuses.every((status) => status === 201 || status === 409)).toBe(true)
      await app.close()
    })
  })
})
