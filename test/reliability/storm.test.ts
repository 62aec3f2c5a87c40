import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { databaseUrl, testSchema } from '../support/env'
import { startApp } from './fixtures/app'
import { connect, createStore, dropSchema, executionsOf, resetSchema } from './fixtures/database'
import { createHttpClient, report } from './fixtures/http'
import {
  type Adapter,
  type Concurrency,
  callOrder,
  expectOneExecution,
  gateOnArrivals,
} from './fixtures/storm'

const schema = testSchema('im_rel_storm')
// PGlite answers one query at a time, so its storm is smaller: 500 waiters polling it would
// only measure its queue.
const callers = databaseUrl ? 500 : 100
const where = databaseUrl
  ? 'on PostgreSQL [postgres]'
  : 'on PGlite (DATABASE_URL is not set: the real-PostgreSQL run is skipped)'

describe(`${callers} concurrent requests with one key against one server ${where}`, () => {
  const database = connect({ url: databaseUrl, max: 10 })
  const http = createHttpClient()
  let tables = 0
  beforeAll(() => resetSchema(database, schema))
  afterAll(async () => {
    http.close()
    await dropSchema(database, schema)
    await database.close()
  })

  const cases: [Adapter, Concurrency][] = [
    ['trpc', 'reject'],
    ['trpc', 'wait'],
    ['graphql', 'reject'],
    ['graphql', 'wait'],
    ['apollo', 'reject'],
    ['apollo', 'wait'],
  ]
  it.each(cases)(
    'through %s over HTTP with concurrency %s, the handler runs exactly once and every other caller gets its replay or 409',
    async (adapter, concurrency) => {
      const store = await createStore(database.db, schema, `keys_${++tables}`)
      const gate = gateOnArrivals(callers)
      const app = await startApp({
        db: database.db,
        schema,
        store,
        engine: { concurrency, waitTimeout: '60s' },
        hooks: gate.hooks,
        apollo: adapter === 'apollo',
      })
      try {
        const key = `storm-${adapter}-${concurrency}`
        const seen = await Promise.all(
          Array.from({ length: callers }, () => callOrder(http, adapter, app.url, key)),
        )
        expect(gate.arrivals()).toBe(callers)
        const executions = await executionsOf(database, schema, key)
        expect(executions).toHaveLength(1)
        const { value, replays, conflicts } = expectOneExecution(seen, adapter, concurrency)
        expect(value).toMatchObject({ id: executions[0]!.id })
        if (concurrency === 'wait') expect(replays).toBe(callers - 1)
        // Once it is over, every retry replays the one recorded value.
        const retry = await callOrder(http, adapter, app.url, key)
        expect(retry).toMatchObject({ status: 200, replay: true, value })
        report(`storm ${adapter} ${concurrency} ${database.kind}`, {
          requests: callers,
          processes: 1,
          executions: executions.length,
          replays,
          conflicts,
        })
      } finally {
        await app.close()
      }
    },
  )
})
