import { randomUUID } from 'node:crypto'
import { createClient } from '@libsql/client'
import { generateSQLiteDrizzleJson, generateSQLiteMigration } from 'drizzle-kit/api'
import { describeStoreConformance } from 'idempotent-mutations/testing'
import { describe, expect, expectTypeOf, it } from 'vitest'
import { createIdempotency } from '../../src'
import {
  createDrizzleStore,
  createSQLiteTableStatements,
  type DrizzleSQLiteDatabase,
  type DrizzleSQLiteStore,
  defineSQLiteIdempotencyTable,
  sqliteIdempotencyKeys,
} from '../../src/stores/drizzle'
import {
  drizzleBetterSqlite3,
  drizzleLibsql,
  normalizeDdl,
  shippedStatements,
  sqliteTables,
  statementLog,
  useSqliteFolder,
} from './dialects'
import { claimInput } from './drizzle-fixtures'
import { betterSqlite3 } from './sqlite-binding'

describe('drizzle store on SQLite: the table', () => {
  it('createDrizzleStore over a libSQL database is a SQLite store, typed as one', () => {
    const store = createDrizzleStore(drizzleLibsql({ client: createClient({ url: ':memory:' }) }))
    expectTypeOf(store).toEqualTypeOf<DrizzleSQLiteStore>()
    expect(store.table).toBe(sqliteIdempotencyKeys)
  })

  it('the shipped schema.sqlite.sql is the DDL ensureTable runs', () => {
    expect(normalizeDdl(shippedStatements('schema.sqlite.sql'))).toEqual(
      normalizeDdl(createSQLiteTableStatements()),
    )
  })

  it('drizzle-kit generates the DDL ensureTable runs', async () => {
    for (const each of [sqliteIdempotencyKeys, defineSQLiteIdempotencyTable('billing_keys')]) {
      const migration = await generateSQLiteMigration(
        await generateSQLiteDrizzleJson({}),
        await generateSQLiteDrizzleJson({ each }),
      )
      expect(normalizeDdl(migration)).toEqual(normalizeDdl(createSQLiteTableStatements(each)))
    }
  })
})

const files = useSqliteFolder('sqlite-store')
const better = betterSqlite3()

/** What runs on each SQLite driver: the conformance suite and the statement counts. */
function describeSqlite(
  name: string,
  open: (logger?: ReturnType<typeof statementLog>) => Promise<DrizzleSQLiteDatabase>,
) {
  describe(`drizzle store on SQLite through ${name}`, () => {
    const log = statementLog()
    const db = open()
    const counted = open(log)
    const tables = db.then(sqliteTables)
    const createStore = async (database?: DrizzleSQLiteDatabase) => (await tables)(database)

    describeStoreConformance({
      name: `drizzle on SQLite (${name}, a WAL file)`,
      createStore: () => createStore(),
      concurrency: 100,
    })

    it('statements: two per first execution (claim, complete), two per replay (claim, read), two per failed execution (claim, release), three per takeover', async () => {
      const store = await createStore(await counted)
      const idempotency = createIdempotency({ store, replayCache: false })
      const request = { key: randomUUID(), operation: 'orders.create', payload: { amount: 5 } }
      const first = await log.count(() => idempotency.execute(request, () => ({ id: 1 })))
      const replay = await log.count(() => idempotency.execute(request, () => ({ id: 2 })))
      const failing = { ...request, key: randomUUID() }
      const failed = await log.count(() =>
        idempotency
          .execute(failing, () => {
            throw new Error('boom')
          })
          .catch(() => undefined),
      )
      const stale = claimInput({ lockTimeoutMs: 0 })
      await store.claim(stale)
      let result: unknown
      const takeover = await log.count(async () => {
        result = await store.claim({ ...stale, leaseToken: 'u' })
      })
      expect(result).toMatchObject({ claimed: true, takeover: true })
      expect({ first, replay, failed, takeover }).toEqual({
        first: 2,
        replay: 2,
        failed: 2,
        takeover: 3,
      })
    })

    it('transactional mode is refused when the engine is built, with a stable code', async () => {
      const store = await createStore()
      expect(() => createIdempotency({ store, transactional: true })).toThrow(
        expect.objectContaining({ code: 'TRANSACTIONAL_UNSUPPORTED' }),
      )
    })
  })
}

let databases = 0
const nextFile = () => `store-${++databases}.db`

describeSqlite('libSQL (@libsql/client)', async (log) => {
  const client = await files.libsql(log ? 'counted-libsql.db' : nextFile())
  return drizzleLibsql({ client, ...(log ? { logger: log.logger } : {}) })
})

// Without `$client` the store cannot tell the driver and sends every statement through
// drizzle's own query path, as it does for D1, Bun's or Expo's SQLite.
describeSqlite("libSQL through drizzle's query path", async (log) => {
  const client = await files.libsql(log ? 'counted-path.db' : nextFile())
  const db = drizzleLibsql({ client, ...(log ? { logger: log.logger } : {}) })
  Reflect.deleteProperty(db, '$client')
  return db
})

if (better.load) {
  const load = better.load
  describeSqlite(`better-sqlite3 ${better.version}`, async (log) => {
    const client = files.betterSqlite3(load, log ? 'counted-better.db' : nextFile())
    return drizzleBetterSqlite3({ client, ...(log ? { logger: log.logger } : {}) })
  })
} else {
  describe.skip(`drizzle store on SQLite through better-sqlite3 (skipped: ${better.reason})`, () => {
    it('runs where better-sqlite3 loads', () => {})
  })
}
