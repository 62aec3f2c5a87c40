import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { databaseUrl, testSchema } from '../support/env'
import { startApp } from './fixtures/app'
import {
  connect,
  createStore,
  type Database,
  dropSchema,
  executionsOf,
  leaseEnded,
  recordsOf,
  resetSchema,
} from './fixtures/database'
import { createGates } from './fixtures/gates'
import { createHttpClient, report } from './fixtures/http'
import { observeStore } from './fixtures/observed-store'
import { startProxy, type TcpProxy } from './fixtures/proxy'
import { type Adapter, callOrder } from './fixtures/storm'

const schema = testSchema('im_rel_outage')
const lockTimeout = 2000

const unavailable: Record<Adapter, string> = {
  trpc: 'STORE_UNAVAILABLE',
  graphql: 'IDEMPOTENCY_STORE_UNAVAILABLE',
  apollo: 'IDEMPOTENCY_STORE_UNAVAILABLE',
}

describe.skipIf(!databaseUrl)(
  `the records database going away and coming back, through a TCP proxy on PostgreSQL [postgres]${databaseUrl ? '' : ' (skipped: DATABASE_URL is not set)'}`,
  () => {
    /** Direct: the schema, the business rows and the checks. Never cut. */
    const direct = connect({ url: databaseUrl, max: 3 })
    const http = createHttpClient()
    let proxy: TcpProxy
    let viaProxy: Database
    let tables = 0
    beforeAll(async () => {
      await resetSchema(direct, schema)
      const target = new URL(databaseUrl!)
      proxy = await startProxy({ host: target.hostname, port: Number(target.port || 5432) })
      viaProxy = connect({ url: databaseUrl, max: 4, via: proxy, reconnectBackoff: 0.01 })
    })
    afterAll(async () => {
      http.close()
      await proxy.restore()
      await viaProxy.close()
      await proxy.close()
      await dropSchema(direct, schema)
      await direct.close()
    })

    /** An app whose records go through the proxy while its business rows go direct. */
    async function outageApp(engine: { onStoreError?: 'fail-closed' | 'fail-open' } = {}) {
      const table = `keys_${++tables}`
      // The table is created directly: the store's own connection is the one that gets cut.
      await createStore(direct.db, schema, table)
      const observed = observeStore(await createStore(viaProxy.db, schema, table))
      const gates = createGates()
      const app = await startApp({
        db: direct.db,
        schema,
        store: observed.store,
        engine: { lockTimeout, ...engine },
        hooks: gates.hooks,
      })
      return { app, table, observed, gates }
    }

    it('while the database is unreachable every claim fails closed with 503 and no handler runs; when it returns the same app serves the key', async () => {
      const { app, gates } = await outageApp()
      try {
        const key = 'outage-claim'
        await proxy.cut()
        const adapters: Adapter[] = ['trpc', 'graphql']
        const attempts = 40
        const seen = await Promise.all(
          Array.from({ length: attempts }, (_, i) => {
            const adapter = adapters[i % 2]!
            return callOrder(http, adapter, app.url, `${key}-${adapter}`).then((s) => ({
              ...s,
              adapter,
            }))
          }),
        )
        for (const s of seen) expect(s).toMatchObject({ status: 503, code: unavailable[s.adapter] })
        const countExecutions = async () => {
          let count = 0
          for (const adapter of adapters) {
            count += (await executionsOf(direct, schema, `${key}-${adapter}`)).length
          }
          return count
        }
        const executionsDuringOutage = await countExecutions()
        expect(executionsDuringOutage).toBe(0)
        const claimErrors = app.events.filter(
          (e) => e.type === 'store-error' && e.stage === 'claim',
        )
        expect(claimErrors).toHaveLength(attempts)

        await proxy.restore()
        for (const adapter of adapters) {
          gates.open(`${key}-${adapter}`)
          const ran = await callOrder(http, adapter, app.url, `${key}-${adapter}`)
          expect(ran).toMatchObject({ status: 200, replay: false })
          const replay = await callOrder(http, adapter, app.url, `${key}-${adapter}`)
          expect(replay).toMatchObject({ status: 200, replay: true, value: ran.value })
          expect(await executionsOf(direct, schema, `${key}-${adapter}`)).toHaveLength(1)
        }
        report('outage while claiming', {
          requests: attempts,
          status503: seen.filter((s) => s.status === 503).length,
          executionsDuringOutage,
          executionsAfterRecovery: await countExecutions(),
        })
      } finally {
        await proxy.restore()
        await app.close()
      }
    })

    it('a completion that cannot be written for the whole lease is retried until the lease ends and reported; the caller got its value at once, and a retry after the lease runs it again', async () => {
      const { app, table, observed, gates } = await outageApp()
      try {
        const key = 'outage-complete'
        const first = callOrder(http, 'trpc', app.url, key)
        await gates.inside(key)
        await proxy.cut()
        gates.open(key)
        // The caller still gets the value its handler returned (the effect happened), within
        // completeTimeout, while the completion goes on in the background.
        const answered = await first
        expect(answered).toMatchObject({ status: 200, replay: false })
        expect(app.events.filter((e) => e.key === key).map((e) => e.type)).toContain(
          'completion-deferred',
        )
        // The outage outlasts the lease: the completion gives up when the lease ends.
        await app.idempotency.drain()
        const completeAttempts = observed.calls.complete
        expect(completeAttempts).toBeGreaterThanOrEqual(2)
        expect(observed.failures.complete).toBe(completeAttempts)
        const reported = app.events.filter((e) => e.type === 'store-error' && e.key === key)
        expect(reported).toMatchObject([{ stage: 'complete' }])
        expect(app.logs.some((log) => log.message.includes('could not record the outcome'))).toBe(
          true,
        )

        await proxy.restore()
        const [stuck] = await recordsOf(direct, schema, table, key)
        expect(stuck).toMatchObject({ status: 'in_progress', response: null })

        await leaseEnded(direct, schema, table, key)
        const retry = await callOrder(http, 'trpc', app.url, key)
        expect(retry).toMatchObject({ status: 200, replay: false })
        expect(retry.value).not.toEqual(answered.value)
        const replay = await callOrder(http, 'trpc', app.url, key)
        expect(replay).toMatchObject({ status: 200, replay: true, value: retry.value })
        // The documented window: an outage longer than the lease loses the first outcome.
        const executions = await executionsOf(direct, schema, key)
        expect(executions).toHaveLength(2)
        report('outage while completing', {
          completeAttempts,
          storeErrorEvents: reported.length,
          executions: executions.length,
        })
      } finally {
        await proxy.restore()
        await app.close()
      }
    })

    it('a completion that fails through an outage shorter than the lease lands in the background once the database is back: the retry replays it, and it ran once', async () => {
      const { app, table, gates } = await outageApp()
      try {
        const key = 'outage-short'
        const first = callOrder(http, 'trpc', app.url, key)
        await gates.inside(key)
        await proxy.cut()
        gates.open(key)
        const answered = await first
        expect(answered).toMatchObject({ status: 200, replay: false })
        await proxy.restore()
        await app.idempotency.drain()
        const types = app.events.filter((e) => e.key === key).map((e) => e.type)
        expect(types).toContain('completed-late')
        expect(types).not.toContain('store-error')
        const [record] = await recordsOf(direct, schema, table, key)
        expect(record?.status).toBe('completed')
        const replay = await callOrder(http, 'trpc', app.url, key)
        expect(replay).toMatchObject({ status: 200, replay: true, value: answered.value })
        expect(await executionsOf(direct, schema, key)).toHaveLength(1)
      } finally {
        await proxy.restore()
        await app.close()
      }
    })

    it('a completion that fails while the database blips lands on a retry: no store-error, no second execution', async () => {
      const { app, table, observed, gates } = await outageApp()
      try {
        const key = 'outage-blip'
        const first = callOrder(http, 'graphql', app.url, key)
        await gates.inside(key)
        await proxy.cut()
        const failed = observed.nextFailure('complete')
        gates.open(key)
        await failed
        await proxy.restore()
        const answered = await first
        expect(answered).toMatchObject({ status: 200, replay: false })
        const { complete: completeAttempts } = observed.calls
        const { complete: failedAttempts } = observed.failures
        expect(failedAttempts).toBeGreaterThanOrEqual(1)
        expect(failedAttempts).toBeLessThan(completeAttempts)
        expect(app.events.filter((e) => e.type === 'store-error')).toEqual([])
        const [record] = await recordsOf(direct, schema, table, key)
        expect(record?.status).toBe('completed')
        const replay = await callOrder(http, 'graphql', app.url, key)
        expect(replay).toMatchObject({ status: 200, replay: true, value: answered.value })
        expect(await executionsOf(direct, schema, key)).toHaveLength(1)
        report('database blip while completing', {
          completeAttempts,
          failedAttempts,
          executions: 1,
        })
      } finally {
        await proxy.restore()
        await app.close()
      }
    })

    it("with onStoreError: 'fail-open' an outage runs the handler unprotected and records nothing", async () => {
      const { app, table, gates } = await outageApp({ onStoreError: 'fail-open' })
      try {
        const key = 'outage-fail-open'
        gates.open(key)
        await proxy.cut()
        const ran = await callOrder(http, 'trpc', app.url, key)
        expect(ran).toMatchObject({ status: 200, replay: false })
        await proxy.restore()
        expect(await executionsOf(direct, schema, key)).toHaveLength(1)
        expect(await recordsOf(direct, schema, table, key)).toEqual([])
      } finally {
        await proxy.restore()
        await app.close()
      }
    })
  },
)
