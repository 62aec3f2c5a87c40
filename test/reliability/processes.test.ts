import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { databaseUrl, testSchema } from '../support/env'
import { type Child, killChildren, spawnChild } from './fixtures/children'
import { connect, dropSchema, executionsOf, resetSchema } from './fixtures/database'
import { createHttpClient, report } from './fixtures/http'
import { type Adapter, type Concurrency, callOrder, expectOneExecution } from './fixtures/storm'

const schema = testSchema('im_rel_processes')
const processes = 4
const callers = 500

describe.skipIf(!databaseUrl)(
  `${callers} concurrent requests with one key spread over ${processes} OS processes on PostgreSQL [postgres]${databaseUrl ? '' : ' (skipped: DATABASE_URL is not set)'}`,
  () => {
    const database = connect({ url: databaseUrl, max: 2 })
    const http = createHttpClient()
    let children: Child[] = []
    beforeAll(async () => {
      await resetSchema(database, schema)
      children = await Promise.all(
        Array.from({ length: processes }, () =>
          spawnChild({
            url: databaseUrl!,
            schema,
            table: 'keys',
            concurrency: ['reject', 'wait'],
            max: 5,
            reportArrivals: true,
            // 125 claims per process queue for 5 connections at once: on a loaded machine that
            // takes longer than the default 2 s bound, and this test is about one execution
            // across processes, not about how fast a storm is answered (the bench measures it).
            engine: { claimTimeout: 30_000 },
          }),
        ),
      )
    })
    afterAll(async () => {
      http.close()
      await killChildren()
      await dropSchema(database, schema)
      await database.close()
    })

    /**
     * Holds the handler, wherever it runs, until the whole storm has reached the servers: each
     * child reports every arrival over IPC, and the test opens the gate in every child at once.
     */
    function openGateOnArrivals(key: string) {
      let arrivals = 0
      const unsubscribe = children.map((child) =>
        child.onMessage((message) => {
          if (message.type !== 'arrived' || message.key !== key) return
          if (++arrivals === callers) for (const each of children) each.open(key)
        }),
      )
      return {
        arrivals: () => arrivals,
        stop: () => {
          for (const stop of unsubscribe) stop()
        },
      }
    }

    const cases: [Adapter, Concurrency][] = [
      ['trpc', 'reject'],
      ['trpc', 'wait'],
      ['graphql', 'reject'],
      ['graphql', 'wait'],
    ]
    it.each(cases)(
      'through %s with concurrency %s, the handler runs exactly once in all processes together',
      async (adapter, concurrency) => {
        const key = `processes-${adapter}-${concurrency}`
        const gate = openGateOnArrivals(key)
        const seen = await Promise.all(
          Array.from({ length: callers }, (_, i) =>
            callOrder(http, adapter, children[i % processes]!.urls[concurrency]!, key),
          ),
        ).finally(gate.stop)
        expect(gate.arrivals()).toBe(callers)
        const executions = await executionsOf(database, schema, key)
        expect(executions).toHaveLength(1)
        const { value, replays, conflicts } = expectOneExecution(seen, adapter, concurrency)
        expect(value).toMatchObject({ id: executions[0]!.id, pid: executions[0]!.pid })
        expect(children.map((child) => child.pid)).toContain(executions[0]!.pid)
        if (concurrency === 'wait') expect(replays).toBe(callers - 1)
        // Every process now replays the one recorded value.
        const retries = await Promise.all(
          children.map((child) => callOrder(http, adapter, child.urls[concurrency]!, key)),
        )
        for (const retry of retries)
          expect(retry).toMatchObject({ status: 200, replay: true, value })
        report(`storm ${adapter} ${concurrency} across processes`, {
          requests: callers,
          processes,
          executions: executions.length,
          replays,
          conflicts,
        })
      },
    )
  },
)
