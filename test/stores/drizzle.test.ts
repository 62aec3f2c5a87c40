import { readFileSync } from 'node:fs'
import { generateDrizzleJson, generateMigration } from 'drizzle-kit/api'
import { drizzle as drizzleNodePg } from 'drizzle-orm/node-postgres'
import { pgTable, text } from 'drizzle-orm/pg-core'
import { drizzle as drizzlePostgresJs } from 'drizzle-orm/postgres-js'
import pg from 'pg'
import postgres from 'postgres'
import { afterAll, describe, expect, it, vi } from 'vitest'
import { createIdempotency } from '../../src'
import {
  createDrizzleStore,
  createTableStatements,
  type DrizzlePgDatabase,
  defineIdempotencyTable,
  type IdempotencyTable,
  idempotencyKeys,
} from '../../src/stores/drizzle'

// Nothing listens on port 1: connections are refused at once.
const unreachable = 'postgres://postgres@127.0.0.1:1/test'

/** DDL with formatting, quoting and optional words taken out, one statement per entry. */
const normalize = (statements: string[]) =>
  statements
    .map((statement) =>
      statement
        .toLowerCase()
        .replaceAll('"', '')
        .replaceAll('if not exists ', '')
        .replaceAll(' using btree', '')
        .replace(/\s+/g, ' ')
        .replace(/\s*([(),])\s*/g, '$1')
        .trim()
        .replace(/;$/, ''),
    )
    .filter((statement) => statement.length > 0)
    .sort()

describe('drizzle store: table and options', () => {
  it('the shipped schema.sql is the DDL ensureTable runs for idempotencyKeys', () => {
    const shipped = readFileSync(
      new URL('../../src/stores/drizzle/schema.sql', import.meta.url),
      'utf8',
    )
    const statements = shipped
      .split('\n')
      .filter((line) => !line.startsWith('--'))
      .join('\n')
      .split(';')
    expect(normalize(statements)).toEqual(normalize(createTableStatements(idempotencyKeys)))
  })

  it('drizzle-kit generates the same table and index from the exported definitions', async () => {
    const inSchema = defineIdempotencyTable('billing_keys', 'billing')
    for (const table of [idempotencyKeys, inSchema]) {
      const migration = await generateMigration(
        generateDrizzleJson({}),
        generateDrizzleJson({ table }),
      )
      const ours = createTableStatements(table).filter((s) => !s.startsWith('CREATE SCHEMA'))
      expect(normalize(migration)).toEqual(normalize(ours))
    }
  })

  it('ensureTable creates the schema of a schema-qualified table first', () => {
    const statements = createTableStatements(defineIdempotencyTable('keys', 'billing'))
    expect(statements[0]).toBe('CREATE SCHEMA IF NOT EXISTS "billing"')
    expect(statements[1]).toContain('CREATE TABLE IF NOT EXISTS "billing"."keys"')
    expect(statements[2]).toContain('ON "billing"."keys" ("expires_at")')
  })

  it.each([
    ['an empty name', ''],
    ['a quote', 'keys"; drop table users; --'],
    ['a dot', 'public.keys'],
    ['a leading digit', '1keys'],
    ['46 characters', 'k'.repeat(46)],
  ])('defineIdempotencyTable rejects a table name with %s', (_, name) => {
    expect(() => defineIdempotencyTable(name)).toThrow(/plain SQL identifier/)
  })

  it('defineIdempotencyTable rejects a schema name that is not a plain identifier', () => {
    expect(() => defineIdempotencyTable('keys', 'my schema')).toThrow(/schema name/)
  })

  it('createDrizzleStore rejects something that is not a drizzle database', () => {
    expect(() => createDrizzleStore({} as DrizzlePgDatabase)).toThrow(/drizzle PostgreSQL database/)
  })

  it('createDrizzleStore rejects a table that is not an idempotency table', () => {
    const db = drizzlePostgresJs({ client: postgres(unreachable) })
    const users = pgTable('users', { id: text('id') }) as unknown as IdempotencyTable
    expect(() => createDrizzleStore(db, { table: users })).toThrow(/defineIdempotencyTable/)
  })

  it('sweep rejects a batchSize or limit that is not a positive integer, or a pause that is not a duration a timer can wait, before any statement', async () => {
    const store = createDrizzleStore(drizzlePostgresJs({ client: postgres(unreachable) }))
    await expect(store.sweep({ batchSize: 0 })).rejects.toThrow(TypeError)
    await expect(store.sweep({ batchSize: 1.5 })).rejects.toThrow(TypeError)
    await expect(store.sweep({ limit: -1 })).rejects.toThrow(TypeError)
    await expect(store.sweep({ pause: 'soon' as never })).rejects.toThrow(/sweep's pause must be/)
    // Longer than a timer can wait: it would fire at once.
    await expect(store.sweep({ pause: '30d' })).rejects.toThrow(/at most 2147483647 ms/)
  })
})

describe('drizzle store: an unreachable database', () => {
  // A new client per test: postgres.js backs off before reconnecting after a refusal.
  const clients: { end(): Promise<void> }[] = []
  afterAll(() => Promise.all(clients.map((client) => client.end())))
  const databases: [string, () => DrizzlePgDatabase][] = [
    [
      'postgres.js',
      () => {
        const client = postgres(unreachable, { max: 1, connect_timeout: 1, onnotice: () => {} })
        clients.push(client)
        return drizzlePostgresJs({ client })
      },
    ],
    [
      'node-postgres',
      () => {
        const pool = new pg.Pool({ connectionString: unreachable, max: 1 })
        clients.push(pool)
        return drizzleNodePg({ client: pool })
      },
    ],
  ]
  const claim = {
    scope: 's',
    key: 'k',
    fingerprint: 'f',
    leaseToken: 't',
    lockTimeoutMs: 1000,
    ttlMs: 1000,
  }

  it.each(databases)('every store call throws through %s', async (_, connect) => {
    const store = createDrizzleStore(connect())
    await expect(store.claim(claim)).rejects.toThrow()
    await expect(store.complete({ ...claim, response: null })).rejects.toThrow()
    await expect(store.release(claim)).rejects.toThrow()
    await expect(store.get('s', 'k')).rejects.toThrow()
    await expect(store.sweep()).rejects.toThrow()
    await expect(store.ensureTable()).rejects.toThrow()
  })

  it.each(databases)(
    'the engine answers 503 STORE_UNAVAILABLE through %s and runs nothing',
    async (_, connect) => {
      const idempotency = createIdempotency({
        store: createDrizzleStore(connect()),
        logger: { warn: vi.fn(), error: vi.fn() },
      })
      const handler = vi.fn()
      const error = await idempotency
        .execute({ key: 'k', operation: 'orders.create' }, handler)
        .catch((e: unknown) => e)
      expect(error).toMatchObject({ code: 'STORE_UNAVAILABLE', status: 503 })
      expect((error as Error).cause).toBeInstanceOf(Error)
      expect(handler).not.toHaveBeenCalled()
    },
  )
})
