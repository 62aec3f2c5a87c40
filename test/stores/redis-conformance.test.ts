import { createRedisStore } from 'idempotent-mutations/redis'
import { describeStoreConformance } from 'idempotent-mutations/testing'
import type { Redis } from 'ioredis'
import { afterAll, beforeAll, describe } from 'vitest'
import {
  clientKinds,
  closeClient,
  connectIoRedis,
  deletePrefixed,
  noRedis,
  redisUrl,
  uniquePrefix,
} from './redis-fixtures'

// Every store of this file writes under this prefix, and the file deletes what it wrote.
const filePrefix = uniquePrefix('conformance')
let stores = 0

afterAll(async () => {
  if (!redisUrl) return
  const admin: Redis = await connectIoRedis()
  try {
    await deletePrefixed(admin, filePrefix)
  } finally {
    admin.disconnect()
  }
})

// The shared store contract, once per supported client. Each test gets a fresh prefix, so its
// records never meet another test's.
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
    createStore: () => createRedisStore(client, { prefix: `${filePrefix}${++stores}:` }),
    concurrency: 100,
    selfExpiring: true,
  })
})
