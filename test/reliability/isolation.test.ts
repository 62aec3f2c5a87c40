import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createIdempotency, createMemoryStore } from '../../src'
import { databaseUrl, testSchema } from '../support/env'
import { type App, startApp } from './fixtures/app'
import { connect, createStore, dropSchema, executionsOf, resetSchema } from './fixtures/database'
import { createHttpClient, report } from './fixtures/http'
import { type Adapter, callOrder, gateOnArrivals } from './fixtures/storm'

const schema = testSchema('im_rel_isolation')
const where = databaseUrl
  ? 'on PostgreSQL [postgres]'
  : 'on PGlite (DATABASE_URL is not set: the real-PostgreSQL run is skipped)'
const adapters: Adapter[] = ['trpc', 'graphql']
const perTenant = 50

/** Tenants whose lookup fails: at once, or as a rejected promise. */
function scope(tenant: string | undefined) {
  if (tenant === 'mallory') throw new Error('tenant lookup failed')
  if (tenant === 'mallory-async') return Promise.reject(new Error('tenant lookup failed'))
  return tenant
}

describe(`tenant isolation over HTTP ${where}`, () => {
  const database = connect({ url: databaseUrl, max: 6 })
  const http = createHttpClient()
  const apps: App[] = []
  let tables = 0
  beforeAll(() => resetSchema(database, schema))
  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()))
    http.close()
    await dropSchema(database, schema)
    await database.close()
  })

  async function isolationApp(hooks = {}) {
    const store = await createStore(database.db, schema, `keys_${++tables}`)
    const app = await startApp({ db: database.db, schema, store, scope, hooks })
    apps.push(app)
    return app
  }

  it.each(adapters)(
    'through %s, two tenants racing with one key each run once and only ever see their own response',
    async (adapter) => {
      const tenants = ['alice', 'bob']
      const gate = gateOnArrivals(perTenant * tenants.length)
      const app = await isolationApp(gate.hooks)
      const key = `shared-${adapter}`
      const calls = Array.from({ length: perTenant * tenants.length }, (_, i) => {
        const tenant = tenants[i % tenants.length]!
        return callOrder(http, adapter, app.url, key, { tenant }).then((seen) => ({ tenant, seen }))
      })
      const results = await Promise.all(calls)
      const executions = await executionsOf(database, schema, key)
      expect(executions.map((e) => e.scope).sort()).toEqual(tenants)
      const crossTenant = results.filter(
        ({ tenant, seen }) =>
          seen.value !== undefined && (seen.value as { tenant: string }).tenant !== tenant,
      )
      expect(crossTenant).toEqual([])
      for (const { tenant, seen } of results) {
        if (seen.status === 409) continue
        const own = executions.find((e) => e.scope === tenant)!
        expect(seen).toMatchObject({ status: 200, value: { id: own.id, tenant } })
      }
      for (const tenant of tenants) {
        const retry = await callOrder(http, adapter, app.url, key, { tenant })
        expect(retry).toMatchObject({ status: 200, replay: true, value: { tenant } })
      }
      report(`tenants racing on one key ${adapter}`, {
        requests: results.length,
        tenants: tenants.length,
        executions: executions.length,
        crossTenantResponses: crossTenant.length,
      })
    },
  )

  const failingTenants = adapters.flatMap((adapter) =>
    ['mallory', 'mallory-async'].map((tenant): [Adapter, string] => [adapter, tenant]),
  )
  it.each(failingTenants)(
    'through %s, a scope function that fails for %s fails the request instead of falling back to the shared scope',
    async (adapter, tenant) => {
      const app = await isolationApp()
      const key = `fallback-${adapter}-${tenant}`
      // A record under the shared scope (a caller without a tenant) for the same key.
      const shared = await callOrder(http, adapter, app.url, key)
      expect(shared).toMatchObject({ status: 200, replay: false, value: { tenant: null } })
      const failed = await callOrder(http, adapter, app.url, key, { tenant })
      // A plain error from `scope` is an unexpected one: 500 (masked by Yoga), never a replay.
      expect(failed).toMatchObject({ status: 500, replay: false, code: 'INTERNAL_SERVER_ERROR' })
      expect(failed.value).toBeUndefined()
      const executions = await executionsOf(database, schema, key)
      expect(executions.map((e) => e.scope)).toEqual([''])
      report(`scope lookup failing for ${tenant} ${adapter}`, {
        requests: 2,
        executions: executions.length,
        failedStatus: failed.status,
      })
    },
  )
})

describe('scopes and operations that look alike never share a record (property, memory store)', () => {
  it('any two different (scope, operation) pairs with one key run twice and each replays its own value', async () => {
    let runs = 0
    let crossed = 0
    await fc.assert(
      fc.asyncProperty(
        fc.tuple(fc.string(), fc.string({ minLength: 1 })),
        fc.tuple(fc.string(), fc.string({ minLength: 1 })),
        async (first, second) => {
          fc.pre(first[0] !== second[0] || first[1] !== second[1])
          runs++
          const idempotency = createIdempotency({ store: createMemoryStore() })
          const call = ([scope, operation]: [string, string], value: string) =>
            idempotency.execute({ key: 'one-key', scope, operation }, () => value)
          expect(await call(first, 'first')).toEqual({ value: 'first', replayed: false })
          expect(await call(second, 'second')).toEqual({ value: 'second', replayed: false })
          const replays = [await call(first, 'again'), await call(second, 'again')]
          if (replays[0]!.value === 'second' || replays[1]!.value === 'first') crossed++
          expect(replays).toEqual([
            { value: 'first', replayed: true },
            { value: 'second', replayed: true },
          ])
        },
      ),
      {
        numRuns: 500,
        // Strings built to collide under naive joining: `a:b` + `c` against `a` + `b:c`, quotes.
        examples: [
          [
            ['a:b', 'c'],
            ['a', 'b:c'],
          ],
          [
            ['x","order.create', 'order.create'],
            ['x', '","order.create'],
          ],
          [
            ['', 'a,b'],
            ['a', 'b'],
          ],
        ],
      },
    )
    report('look-alike scopes', { pairs: runs, crossedReplays: crossed })
  })
})
