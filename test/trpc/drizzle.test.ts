import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { defineIdempotencyTable } from '../../src/stores/drizzle'
import { testSchema } from '../support/env'
import { connectTwoServers, twoServersWhere } from '../support/two-servers'
import { createApp, serve, settle } from './fixtures'

// This file's own schema: other files use the same database at the same time.
const schemaName = testSchema('im_test_trpc')

const connect = connectTwoServers
const where = twoServersWhere

describe(`tRPC middleware with the Drizzle store ${where}`, () => {
  const database = connect()
  const closers: (() => Promise<void>)[] = []
  let tables = 0
  beforeAll(async () => {
    await database.execute(`drop schema if exists "${schemaName}" cascade`)
  })
  afterAll(async () => {
    await Promise.all(closers.map((close) => close()))
    await database.execute(`drop schema if exists "${schemaName}" cascade`)
    await database.close()
  })

  /** Two tRPC fetch servers, each with its own engine and connection, over one new table. */
  async function twoServers() {
    const table = defineIdempotencyTable(`records_${++tables}`, schemaName)
    const stores = database.stores(table)
    await stores[0]!.ensureTable()
    const apps = stores.map((store) => createApp({ superjson: true, store }))
    const servers = await Promise.all(apps.map((app) => serve(app, 'fetch')))
    closers.push(...servers.map((server) => server.close))
    return { apps, servers }
  }

  it('replays on a second server the mutation the first ran, with Dates, Maps and BigInts intact', async () => {
    const { apps, servers } = await twoServers()
    const call = (i: number) =>
      servers[i]!.client.order.rich.mutate(undefined, { context: { key: 'pg-1' } })
    const first = await call(0)
    const retry = await call(1)
    expect(retry).toEqual(first)
    expect(retry.at).toBeInstanceOf(Date)
    expect(retry.tags).toEqual(new Map([['vip', 1n]]))
    expect(apps[0]!.spies.rich).toHaveBeenCalledTimes(1)
    expect(apps[1]!.spies.rich).not.toHaveBeenCalled()
    expect(servers[1]!.responses.at(-1)?.replay).toBe('true')
  })

  it('runs a mutation once when many callers race on one key across two servers; the rest get 409', async () => {
    const { apps, servers } = await twoServers()
    const callers = 24
    let settled = 0
    const release = () => {
      for (const app of apps) app.slowRelease.resolve()
    }
    const results = Array.from({ length: callers }, (_, i) =>
      settle(
        servers[i % 2]!.client.order.slow.mutate(undefined, { context: { key: 'pg-2' } }),
      ).finally(() => {
        // The one that won the claim blocks until every other caller has its answer.
        if (++settled === callers - 1) release()
      }),
    )
    const outcomes = await Promise.all(results)
    const runs = apps.reduce((sum, app) => sum + app.spies.slow.mock.calls.length, 0)
    expect(runs).toBe(1)
    expect(outcomes.filter((o) => o.ok)).toEqual([{ ok: true, value: 'done' }])
    const conflicts = outcomes.filter((o) => !o.ok)
    expect(conflicts).toHaveLength(callers - 1)
    for (const conflict of conflicts) {
      expect(conflict).toMatchObject({ data: { httpStatus: 409, idempotency: 'IN_PROGRESS' } })
    }
    const retries = await Promise.all(
      servers.map((server) =>
        server.client.order.slow.mutate(undefined, { context: { key: 'pg-2' } }),
      ),
    )
    expect(retries).toEqual(['done', 'done'])
    expect(servers.map((server) => server.responses.at(-1)?.replay)).toEqual(['true', 'true'])
  })

  it('releases the key after an INTERNAL_SERVER_ERROR, so the other server runs it again', async () => {
    const { apps, servers } = await twoServers()
    const call = (i: number) =>
      settle(servers[i]!.client.order.crash.mutate(undefined, { context: { key: 'pg-3' } }))
    expect(await call(0)).toMatchObject({ ok: false, data: { httpStatus: 500 } })
    expect(await call(1)).toMatchObject({ ok: false, data: { httpStatus: 500 } })
    expect(apps.map((app) => app.spies.crash.mock.calls.length)).toEqual([1, 1])
  })
})
