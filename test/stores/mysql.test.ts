import { randomUUID } from 'node:crypto'
import { generateMySQLDrizzleJson, generateMySQLMigration } from 'drizzle-kit/api'
import { getTableConfig } from 'drizzle-orm/mysql-core'
import { drizzle } from 'drizzle-orm/mysql2'
import { describeStoreConformance } from 'idempotent-mutations/testing'
import mysql2 from 'mysql2/promise'
import { describe, expect, expectTypeOf, it } from 'vitest'
import { createIdempotency } from '../../src'
import {
  createDrizzleStore,
  createMySqlTableStatements,
  type DrizzleMySqlStore,
  defineMySqlIdempotencyTable,
  mysqlIdempotencyKeys,
} from '../../src/stores/drizzle'
import { mysqlUrl } from '../support/env'
import { normalizeDdl, shippedStatements, useMySql } from './dialects'
import { claimInput } from './drizzle-fixtures'

const skipped = mysqlUrl ? '' : ' (skipped: MYSQL_URL is not set)'

describe('drizzle store on MySQL: the table', () => {
  it('createDrizzleStore over a mysql2 database is a MySQL store, typed as one', async () => {
    const pool = mysql2.createPool({ uri: 'mysql://root@127.0.0.1:1/none' })
    const store = createDrizzleStore(drizzle({ client: pool }))
    expectTypeOf(store).toEqualTypeOf<DrizzleMySqlStore>()
    expect(store.table).toBe(mysqlIdempotencyKeys)
    await pool.end()
  })

  it('the shipped schema.mysql.sql is the DDL ensureTable runs', () => {
    expect(normalizeDdl(shippedStatements('schema.mysql.sql'))).toEqual(
      normalizeDdl(createMySqlTableStatements()),
    )
  })

  it('drizzle-kit generates the DDL ensureTable runs, binary collation included', async () => {
    const table = defineMySqlIdempotencyTable('billing_keys')
    for (const each of [mysqlIdempotencyKeys, table]) {
      const migration = await generateMySQLMigration(
        await generateMySQLDrizzleJson({}),
        await generateMySQLDrizzleJson({ each }),
      )
      expect(normalizeDdl(migration)).toEqual(normalizeDdl(createMySqlTableStatements(each)))
    }
  })
})

describe.skipIf(!mysqlUrl)(`drizzle store on MariaDB through mysql2 [mysql]${skipped}`, () => {
  const mysql = useMySql(mysqlUrl ?? 'mysql://unset', 'store')

  describeStoreConformance({
    name: 'drizzle on MariaDB (INSERT … RETURNING) [mysql]',
    createStore: () => mysql.createStore(),
    concurrency: 100,
  })

  // MySQL 8 has no INSERT … RETURNING: its path (the claim, then a SELECT) runs on MariaDB too.
  describeStoreConformance({
    name: 'drizzle on MariaDB through the MySQL 8 path (no RETURNING) [mysql]',
    createStore: () => mysql.createStore({ server: 'mysql' }),
    concurrency: 100,
  })

  it.each([
    ['MariaDB', 'mariadb', { first: 2, replay: 1, failed: 2, takeover: 3 }],
    ['MySQL 8', 'mysql', { first: 3, replay: 2, failed: 3, takeover: 4 }],
  ] as const)(
    'statements on the %s path: a first execution, a replay, a failed execution, a takeover [mysql]',
    async (_, server, expected) => {
      const store = await mysql.createStore({ server, counted: true })
      const idempotency = createIdempotency({ store, replayCache: false })
      const request = { key: randomUUID(), operation: 'orders.create', payload: { amount: 5 } }
      const first = await mysql.log.count(() => idempotency.execute(request, () => ({ id: 1 })))
      const replay = await mysql.log.count(() => idempotency.execute(request, () => ({ id: 2 })))
      const failing = { ...request, key: randomUUID() }
      const failed = await mysql.log.count(() =>
        idempotency
          .execute(failing, () => {
            throw new Error('boom')
          })
          .catch(() => undefined),
      )
      const stale = claimInput({ lockTimeoutMs: 0 })
      await store.claim(stale)
      let result: unknown
      const takeover = await mysql.log.count(async () => {
        result = await store.claim({ ...stale, leaseToken: 'u' })
      })
      expect(result).toMatchObject({ claimed: true, takeover: true })
      expect({ first, replay, failed, takeover }).toEqual(expected)
    },
  )

  it('keys and scopes that differ only in case, accents or trailing text are different records [mysql]', async () => {
    const store = await mysql.createStore()
    const claims = ['Key', 'key', 'KEY', 'kéy'].map((key) => claimInput({ key }))
    for (const claim of claims) expect((await store.claim(claim)).claimed).toBe(true)
    const scoped = ['Tenant', 'tenant'].map((scope) => claimInput({ scope, key: 'k' }))
    for (const claim of scoped) expect((await store.claim(claim)).claimed).toBe(true)
    // A lease token that differs only in case is not the lease.
    const held = claimInput({ leaseToken: 'Token' })
    await store.claim(held)
    expect(await store.complete({ ...held, leaseToken: 'token', response: 'r' })).toBe(false)
  })

  it('a scope longer than the column fails the claim instead of being cut short [mysql]', async () => {
    const store = await mysql.createStore()
    await expect(store.claim(claimInput({ scope: 's'.repeat(513) }))).rejects.toThrow(
      /scope of this operation is 513 characters/,
    )
    expect((await store.claim(claimInput({ scope: 's'.repeat(512) }))).claimed).toBe(true)
  })

  it('ensureTable from several callers at once creates one table and index [mysql]', async () => {
    const store = await mysql.createStore()
    await Promise.all([store.ensureTable(), store.ensureTable(), store.ensureTable()])
    const [indexes] = await mysql.pool.query(
      'select index_name, column_name from information_schema.statistics where table_schema = database() and table_name = ? order by index_name, seq_in_index',
      [getTableConfig(store.table).name],
    )
    expect(
      (indexes as { index_name: string; column_name: string }[]).map(
        (row) => `${row.index_name}(${row.column_name})`,
      ),
    ).toEqual([
      expect.stringMatching(/_expires_at_idx\(expires_at\)$/),
      'PRIMARY(scope)',
      'PRIMARY(key)',
    ])
  })

  it('transactional mode is refused when the engine is built, with a stable code [mysql]', async () => {
    const store = await mysql.createStore()
    expect(() => createIdempotency({ store, transactional: true })).toThrow(
      expect.objectContaining({
        code: 'TRANSACTIONAL_UNSUPPORTED',
        message: expect.stringMatching(/PostgreSQL only/),
      }),
    )
    // Without it the store works, and spreading or printing it reads nothing that throws.
    expect({ ...store }).not.toHaveProperty('transaction')
    expect(createIdempotency({ store })).toBeDefined()
  })
})
