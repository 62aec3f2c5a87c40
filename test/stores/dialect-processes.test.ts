import { type ChildProcess, fork } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { getTableName } from 'drizzle-orm'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { IdempotencyStore } from '../../src'
import { mysqlUrl } from '../support/env'
import type { ClaimerConfig, ClaimerResult, ClaimerRun } from './dialect-claimer'
import {
  drizzleBetterSqlite3,
  drizzleLibsql,
  sqliteTables,
  useMySql,
  useSqliteFolder,
} from './dialects'
import { betterSqlite3 } from './sqlite-binding'

const processes = 4
const perProcess = 25
const claimer = fileURLToPath(new URL('./dialect-claimer.ts', import.meta.url))
const root = fileURLToPath(new URL('../..', import.meta.url))

/** A run message without its envelope. */
type Run = ClaimerRun extends infer Each
  ? Each extends ClaimerRun
    ? Omit<Each, 'type' | 'id'>
    : never
  : never

interface Claimer {
  run(message: Run): Promise<ClaimerResult[]>
}

/** Starts the claimer processes on one table; resolves once each says it is ready. */
function useClaimers(config: () => ClaimerConfig) {
  const children: ChildProcess[] = []
  const claimers: Claimer[] = []
  beforeAll(async () => {
    await Promise.all(
      Array.from({ length: processes }, async () => {
        const child = fork(claimer, [JSON.stringify(config())], {
          cwd: root,
          execArgv: ['--import', 'tsx'],
          stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
        })
        children.push(child)
        const pending = new Map<number, (results: ClaimerResult[]) => void>()
        let ids = 0
        await new Promise<void>((resolve, reject) => {
          child.once('exit', (code) => reject(new Error(`a claimer exited with ${code}`)))
          child.on('message', (message: { type: string; id: number; results: ClaimerResult[] }) => {
            if (message.type === 'ready') resolve()
            if (message.type === 'done') pending.get(message.id)?.(message.results)
            if (message.type === 'failed') throw new Error(JSON.stringify(message))
          })
        })
        claimers.push({
          run: (message) =>
            new Promise((resolve) => {
              const id = ++ids
              pending.set(id, resolve)
              child.send({ type: 'run', id, ...message })
            }),
        })
      }),
    )
  }, 60_000)
  afterAll(() => {
    for (const child of children) child.kill('SIGKILL')
  })
  /** Sends `message` to every process at once and gathers every result. */
  return (message: Run) =>
    Promise.all(claimers.map((each) => each.run(message))).then((all) => all.flat())
}

/** Lets the store's clock pass `deadline`, read from refused claims of a probe key. */
async function passStoreTime(store: IdempotencyStore, deadline: number) {
  const probe = {
    scope: 'clock',
    key: randomUUID(),
    fingerprint: 'f',
    lockTimeoutMs: 60_000,
    ttlMs: 60_000,
  }
  await store.claim({ ...probe, leaseToken: 'probe' })
  for (;;) {
    const result = await store.claim({ ...probe, leaseToken: randomUUID() })
    if (!result.claimed && result.now > deadline) return
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

function describeProcessRaces(
  name: string,
  setup: () => { store: () => IdempotencyStore; config: () => ClaimerConfig },
) {
  describe(`${processes} processes × ${perProcess} concurrent callers on ${name}`, () => {
    const { store, config } = setup()
    const runAll = useClaimers(config)

    it('one key: the handler runs once in all processes together; every other caller gets 409 or its replay', async () => {
      const key = randomUUID()
      const results = await runAll({ op: 'execute', key, count: perProcess })
      expect(results).toHaveLength(processes * perProcess)
      const ran = results.filter((result) => 'ran' in result && result.ran)
      expect(ran).toHaveLength(1)
      const value = (ran[0] as { value: unknown }).value
      for (const result of results) {
        if ('error' in result) expect(result.error).toBe('IN_PROGRESS')
        else if ('ran' in result && !result.ran)
          expect(result).toMatchObject({ replayed: true, value })
      }
      expect(await store().get(JSON.stringify(['', 'orders.create']), key)).toMatchObject({
        status: 'completed',
      })
    })

    it('a lapsed lease: exactly one claimer takes it over, and the old executor is fenced off', async () => {
      const key = randomUUID()
      const old = {
        scope: 's',
        key,
        fingerprint: 'f',
        leaseToken: 'old',
        lockTimeoutMs: 50,
        ttlMs: 60_000,
      }
      const first = await store().claim(old)
      if (!first.claimed) throw new Error('the first claim must win')
      await passStoreTime(store(), first.record.lockedUntil)
      const results = (await runAll({
        op: 'claim',
        key,
        count: perProcess,
        lockTimeoutMs: 60_000,
      })) as {
        claimed: boolean
        takeover: boolean
        token: string
        recordToken: string
      }[]
      const winners = results.filter((result) => result.claimed)
      expect(winners).toHaveLength(1)
      expect(winners[0]!.takeover).toBe(true)
      for (const result of results) expect(result.recordToken).toBe(winners[0]!.token)
      expect(await store().complete({ ...old, response: 'late' })).toBe(false)
      expect(await store().release(old)).toBe(false)
      expect(await store().get('s', key)).toMatchObject({
        status: 'in_progress',
        leaseToken: winners[0]!.token,
      })
    })
  })
}

describe.skipIf(!mysqlUrl)(
  `multi-process races on MariaDB [mysql]${mysqlUrl ? '' : ' (skipped: MYSQL_URL is not set)'}`,
  () => {
    describeProcessRaces('MariaDB through mysql2 [mysql]', () => {
      const mysql = useMySql(mysqlUrl ?? 'mysql://unset', 'procs')
      let store: (IdempotencyStore & { table: object }) | undefined
      beforeAll(async () => {
        store = await mysql.createStore()
      })
      return {
        store: () => store!,
        config: () => ({
          driver: 'mysql2',
          target: mysqlUrl!,
          table: getTableName(store!.table as never),
        }),
      }
    })
  },
)

const files = useSqliteFolder('sqlite-processes')
const better = betterSqlite3()
const sqliteDrivers: ClaimerConfig['driver'][] = better.load
  ? ['libsql', 'better-sqlite3']
  : ['libsql']

describe.each(sqliteDrivers)(
  'multi-process races on one SQLite file (WAL) through %s',
  (driver) => {
    describeProcessRaces(`a SQLite file through ${driver}`, () => {
      const file = `races-${driver}.db`
      let store: IdempotencyStore | undefined
      beforeAll(async () => {
        const db =
          driver === 'libsql'
            ? drizzleLibsql({ client: await files.libsql(file) })
            : drizzleBetterSqlite3({ client: files.betterSqlite3(better.load!, file) })
        store = await sqliteTables(db)()
      })
      return {
        store: () => store!,
        config: () => ({ driver, target: join(files.folder, file), table: 't1' }),
      }
    })
  },
)

if (!better.load) {
  describe.skip(`multi-process races on SQLite through better-sqlite3 (skipped: ${better.reason})`, () => {
    it('runs where better-sqlite3 loads', () => {})
  })
}
