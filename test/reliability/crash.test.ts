import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { databaseUrl, testSchema } from '../support/env'
import { type Child, killChildren, spawnChild } from './fixtures/children'
import {
  connect,
  dropSchema,
  executionsOf,
  leaseEnded,
  recordsOf,
  resetSchema,
} from './fixtures/database'
import { createHttpClient, report } from './fixtures/http'
import { type Adapter, callOrder } from './fixtures/storm'

const schema = testSchema('im_rel_crash')
const table = 'keys'
// Short leases, so a dead executor's key comes back within the test. The executor that crashes
// holds a longer one, so the test's check that its key is still held (409) has room to run
// before the lease ends even on a busy machine.
const lockTimeout = 2000
const crashingLockTimeout = 3000

describe.skipIf(!databaseUrl)(
  `an executor process that is killed or paused mid-handler, on PostgreSQL [postgres]${databaseUrl ? '' : ' (skipped: DATABASE_URL is not set)'}`,
  () => {
    const database = connect({ url: databaseUrl, max: 2 })
    const http = createHttpClient()
    /** The process that retries; the ones that crash are started per case. */
    let survivor: Child
    const start = (leaseMs: number) =>
      spawnChild({
        url: databaseUrl!,
        schema,
        table,
        concurrency: ['reject'],
        lockTimeout: leaseMs,
        max: 3,
      })
    beforeAll(async () => {
      await resetSchema(database, schema)
      survivor = await start(lockTimeout)
    })
    afterAll(async () => {
      http.close()
      await killChildren()
      await dropSchema(database, schema)
      await database.close()
    })

    const url = (child: Child) => child.urls.reject!
    const inside = (child: Child, key: string) =>
      child.next((m) => m.type === 'inside' && m.key === key)
    const event = (child: Child, type: string, key: string) =>
      child.next((m) => m.type === 'event' && m.event.type === type && m.event.key === key)

    it.each<Adapter>(['trpc', 'graphql'])(
      'through %s: a SIGKILL mid-handler keeps the key in progress until the lease ends, then a retry elsewhere takes it over and records it once',
      async (adapter) => {
        const key = `sigkill-${adapter}`
        const doomed = await start(crashingLockTimeout)
        // The handler writes its business row in a transaction that commits after the gate.
        const first = callOrder(http, adapter, url(doomed), key, { mode: 'tx' }).then(
          () => 'answered',
          () => 'connection lost',
        )
        await inside(doomed, key)
        doomed.signal('SIGKILL')
        await doomed.exited
        expect(await first).toBe('connection lost')

        const [stuck] = await recordsOf(database, schema, table, key)
        expect(stuck).toMatchObject({ status: 'in_progress', lease_over: false })
        const early = await callOrder(http, adapter, url(survivor), key, { mode: 'tx' })
        expect(early).toMatchObject({ status: 409, retryAfter: expect.any(String) })

        await leaseEnded(database, schema, table, key)
        survivor.open(key)
        const retry = await callOrder(http, adapter, url(survivor), key, { mode: 'tx' })
        expect(retry).toMatchObject({ status: 200, replay: false, value: { pid: survivor.pid } })
        await event(survivor, 'takeover', key)

        const [record] = await recordsOf(database, schema, table, key)
        expect(record?.status).toBe('completed')
        expect(record?.lease_token).not.toBe(stuck?.lease_token)
        // The killed transaction rolled back: one committed execution, the survivor's.
        const executions = await executionsOf(database, schema, key)
        expect(executions.map((e) => e.pid)).toEqual([survivor.pid])
        const again = await callOrder(http, adapter, url(survivor), key, { mode: 'tx' })
        expect(again).toMatchObject({ status: 200, replay: true, value: retry.value })
        report(`SIGKILL mid-handler ${adapter}`, {
          processes: 2,
          killed: 1,
          executions: executions.length,
          lockTimeoutMs: crashingLockTimeout,
        })
      },
    )

    it('a SIGKILL after the business commit but before the record completes runs the operation again after the lease ends (the documented window)', async () => {
      const key = 'sigkill-after-commit'
      const doomed = await start(crashingLockTimeout)
      // `plain`: the business row commits before the gate, so the crash falls in the window.
      const first = callOrder(http, 'trpc', url(doomed), key).catch(() => undefined)
      await inside(doomed, key)
      doomed.signal('SIGKILL')
      await doomed.exited
      await first
      await leaseEnded(database, schema, table, key)
      survivor.open(key)
      const retry = await callOrder(http, 'trpc', url(survivor), key)
      expect(retry).toMatchObject({ status: 200, replay: false })
      const executions = await executionsOf(database, schema, key)
      expect(executions.map((e) => e.pid)).toEqual([doomed.pid, survivor.pid])
      report('SIGKILL after business commit (duplicate window)', {
        processes: 2,
        killed: 1,
        executions: executions.length,
      })
    })

    it.each<Adapter>(['trpc', 'graphql'])(
      'through %s: a paused executor that resumes after a takeover cannot overwrite the new outcome, and its caller still gets its own value',
      async (adapter) => {
        const key = `sigstop-${adapter}`
        const paused = await start(crashingLockTimeout)
        const first = callOrder(http, adapter, url(paused), key)
        await inside(paused, key)
        paused.signal('SIGSTOP')
        try {
          await leaseEnded(database, schema, table, key)
          survivor.open(key)
          const takeover = await callOrder(http, adapter, url(survivor), key)
          expect(takeover).toMatchObject({
            status: 200,
            replay: false,
            value: { pid: survivor.pid },
          })
          const [recorded] = await recordsOf(database, schema, table, key)
          expect(recorded?.status).toBe('completed')

          paused.signal('SIGCONT')
          paused.open(key)
          const late = await first
          expect(late).toMatchObject({ status: 200, replay: false, value: { pid: paused.pid } })
          expect(late.value).not.toEqual(takeover.value)
          await event(paused, 'lost-lease', key)

          // The record still holds the new outcome, and both processes replay it.
          const [after] = await recordsOf(database, schema, table, key)
          expect(after).toEqual(recorded)
          for (const child of [survivor, paused]) {
            const replay = await callOrder(http, adapter, url(child), key)
            expect(replay).toMatchObject({ status: 200, replay: true, value: takeover.value })
          }
          const executions = await executionsOf(database, schema, key)
          expect(executions.map((e) => e.pid)).toEqual([paused.pid, survivor.pid])
          report(`SIGSTOP/SIGCONT around a takeover ${adapter}`, {
            processes: 2,
            executions: executions.length,
            recordKept: JSON.stringify(after) === JSON.stringify(recorded) ? 'yes' : 'no',
          })
        } finally {
          paused.signal('SIGCONT')
        }
      },
    )
  },
)
