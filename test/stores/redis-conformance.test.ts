import { createRedisStore } from 'idempotent-mutations/redis'
import { afterAll, beforeAll, describe } from 'vitest'
import { describeStoreConformance } from './conformance'
import { clientKinds, closeClient, noRedis, redisUrl, uniquePrefix } from './redis-fixtures'

// The shared store contract, once per supported client. Each test gets a fresh prefix, so its
// records never meet another test's; Redis deletes them itself when they expire.
describe.skipIf(!redisUrl).each(clientKinds)(`[redis] $name${noRedis}`, ({ name, connect }) => {
  let client: Awaited<ReturnType<typeof connect>>
  beforeAll(async () => {
    client = await connect()
  })
  afterAll(async () => {
    await closeClient(client)
  })
  describeStoreConformance({
    name: `Redis via ${name}`,
    createStore: () => createRedisStore(client, { prefix: uniquePrefix('conformance') }),
    concurrency: 100,
    selfExpiring: true,
  })
})
