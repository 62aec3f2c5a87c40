import { randomUUID } from 'node:crypto'
import { getTableName, sql } from 'drizzle-orm'
import { Cache, type MutationOption } from 'drizzle-orm/cache/core'
import { afterAll, beforeAll } from 'vitest'
import type { ClaimInput } from '../../src'
import {
  createDrizzleStore,
  type DrizzlePgDatabase,
  defineIdempotencyTable,
} from '../../src/stores/drizzle'

/**
 * Gives each test its own table in a schema owned by one test file, so files run in parallel
 * on one database without meeting. The schema is dropped before (in case this file failed to
 * clean up earlier in the same process) and after the file; schemas of killed runs are dropped
 * by the global setup (see testSchema).
 */
export function useTestTables(db: () => DrizzlePgDatabase, schema: string) {
  let count = 0
  beforeAll(async () => {
    await db().execute(sql.raw(`drop schema if exists "${schema}" cascade`))
  })
  afterAll(async () => {
    await db().execute(sql.raw(`drop schema if exists "${schema}" cascade`))
  })
  return {
    /** A store over a new, empty table of this file's schema. */
    async createStore(target: DrizzlePgDatabase = db()) {
      count++
      const store = createDrizzleStore(target, {
        table: defineIdempotencyTable(`t${count}`, schema),
      })
      await store.ensureTable()
      return store
    },
  }
}

/** A drizzle `logger` that counts the statements sent. */
export function statementCounter() {
  const statements: string[] = []
  return {
    statements,
    logger: { logQuery: (query: string) => void statements.push(query) },
    /** Statements sent while `action` ran. */
    async count(action: () => Promise<unknown>): Promise<number> {
      const before = statements.length
      await action()
      return statements.length - before
    },
  }
}

/** A drizzle query cache that keeps every select's result until a drizzle write to its table. */
export class EverythingCache extends Cache {
  readonly entries = new Map<string, unknown[]>()
  override strategy() {
    return 'all' as const
  }
  override async get(key: string) {
    return this.entries.get(key)
  }
  override async put(key: string, response: unknown) {
    this.entries.set(key, response as unknown[])
  }
  override async onMutate() {
    this.entries.clear()
  }
}

/**
 * A drizzle query cache that, like drizzle's own Upstash cache, forgets a select's result only
 * when a drizzle write touches a table the select read: a select of no table (`set_config`,
 * `current_setting`) is answered from the cache forever after its first run.
 */
export class TableCache extends Cache {
  readonly entries = new Map<string, { response: unknown[]; tables: string[] }>()
  hits = 0
  override strategy() {
    return 'all' as const
  }
  override async get(key: string) {
    const entry = this.entries.get(key)
    if (entry) this.hits++
    return entry?.response
  }
  override async put(key: string, response: unknown, tables: string[]) {
    this.entries.set(key, { response: response as unknown[], tables })
  }
  override async onMutate({ tables = [] }: MutationOption) {
    const names = (Array.isArray(tables) ? tables : [tables]).map((table) =>
      typeof table === 'string' ? table : getTableName(table),
    )
    for (const [key, entry] of this.entries) {
      if (entry.tables.some((table) => names.includes(table))) this.entries.delete(key)
    }
  }
}

/** A claim of a fresh key in scope 's' under token 't'. */
export const claimInput = (overrides: Partial<ClaimInput> = {}): ClaimInput => ({
  scope: 's',
  key: randomUUID(),
  fingerprint: 'f',
  leaseToken: 't',
  lockTimeoutMs: 60_000,
  ttlMs: 60_000,
  ...overrides,
})
