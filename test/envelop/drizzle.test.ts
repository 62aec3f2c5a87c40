import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { defineIdempotencyTable } from '../../src/stores/drizzle'
import { testSchema } from '../support/env'
import { connectTwoServers, twoServersWhere } from '../support/two-servers'
import { type Client, createFixture, createOrder, httpClient } from './fixtures'

// This file's own schema: other files use the same database at the same time.
const schemaName = testSchema('im_test_envelop')

const connect = connectTwoServers
const where = twoServersWhere

describe(`useIdempotency with the Drizzle store ${where}`, () => {
  const database = connect()
  const open: Client[] = []
  let tables = 0
  beforeAll(async () => {
    await database.execute(`drop schema if exists "${schemaName}" cascade`)
  })
  afterAll(async () => {
    await Promise.all(open.map((client) => client.close()))
    await database.execute(`drop schema if exists "${schemaName}" cascade`)
    await database.close()
  })

  /** Two Yoga servers, each with its own engine and connection, over one new table. */
  async function twoServers() {
    const table = defineIdempotencyTable(`records_${++tables}`, schemaName)
    const stores = database.stores(table)
    await stores[0]!.ensureTable()
    const servers = stores.map((store) => createFixture({ store }))
    const clients = await Promise.all(servers.map((server) => httpClient(server.yoga)))
    return { servers, clients }
  }

  it('replays, on a second server, the mutation the first one ran', async () => {
    const { servers, clients } = await twoServers()
    open.push(...clients)
    const body = { query: createOrder, variables: { item: 'desk', quantity: 1 } }
    const first = await clients[0]!.post(body, { 'idempotency-key': 'pg-1' })
    const second = await clients[1]!.post(body, { 'idempotency-key': 'pg-1' })
    expect(servers[0]!.resolvers.createOrder).toHaveBeenCalledTimes(1)
    expect(servers[1]!.resolvers.createOrder).not.toHaveBeenCalled()
    expect(second.text).toBe(first.text)
    expect(second.headers.get('idempotent-replay')).toBe('true')
  })

  it('replays a recorded expected error identically from the database', async () => {
    const { servers, clients } = await twoServers()
    open.push(...clients)
    const body = { query: 'mutation {\n  rejectOrder(reason: "closed", status: 403) { id }\n}' }
    const first = await clients[0]!.post(body, { 'idempotency-key': 'pg-err' })
    const second = await clients[1]!.post(body, { 'idempotency-key': 'pg-err' })
    expect(first.status).toBe(403)
    expect(second.status).toBe(403)
    expect(second.text).toBe(first.text)
    expect(servers[0]!.resolvers.rejectOrder).toHaveBeenCalledTimes(1)
  })

  it('runs a mutation once when many duplicates race across two servers, and answers the rest 409', async () => {
    const { servers, clients } = await twoServers()
    open.push(...clients)
    const duplicates = 24
    const slow = { query: 'mutation { slowOrder(item: "chair") { id item } }' }
    let answered = 0
    let allButOneAnswered!: () => void
    const waiting = new Promise<void>((resolve) => {
      allButOneAnswered = resolve
    })
    const replies = Array.from({ length: duplicates }, (_, i) =>
      clients[i % 2]!.post(slow, { 'idempotency-key': 'pg-race' }).then((reply) => {
        if (++answered === duplicates - 1) allButOneAnswered()
        return reply
      }),
    )
    await waiting
    for (const server of servers) server.gate.open()
    const all = await Promise.all(replies)
    const calls = servers.reduce((n, server) => n + server.resolvers.slowOrder.mock.calls.length, 0)
    expect(calls).toBe(1)
    expect(all.filter((reply) => reply.status === 200)).toHaveLength(1)
    const conflicts = all.filter((reply) => reply.status === 409)
    expect(conflicts).toHaveLength(duplicates - 1)
    for (const conflict of conflicts) {
      expect(conflict.json.errors[0].extensions.code).toBe('IDEMPOTENCY_IN_PROGRESS')
      expect(Number(conflict.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
    }
    const winner = all.find((reply) => reply.status === 200)!
    const retry = await clients[1]!.post(slow, { 'idempotency-key': 'pg-race' })
    expect(retry.text).toBe(winner.text)
  })

  it('runs an unexpected failure again on the retry: the database record was released', async () => {
    const { servers, clients } = await twoServers()
    open.push(...clients)
    const failing = { query: 'mutation { failUnexpectedly { id } }' }
    const first = await clients[0]!.post(failing, { 'idempotency-key': 'pg-fail' })
    const second = await clients[1]!.post(failing, { 'idempotency-key': 'pg-fail' })
    expect(first.json.errors[0].message).toBe('Unexpected error.')
    expect(second.text).toBe(first.text)
    expect(servers[0]!.resolvers.failUnexpectedly).toHaveBeenCalledTimes(1)
    expect(servers[1]!.resolvers.failUnexpectedly).toHaveBeenCalledTimes(1)
  })
})
