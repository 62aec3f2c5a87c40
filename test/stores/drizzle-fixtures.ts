import { sql } from 'drizzle-orm'
import { afterAll, beforeAll } from 'vitest'
import {
  createDrizzleStore,
  type DrizzlePgDatabase,
  defineIdempotencyTable,
} from '../../src/stores/drizzle'

/**
 * Gives each test its own table in a schema owned by one test file, so files run in parallel
 * on one database without meeting. The schema is dropped before (leftovers of a killed run)
 * and after the file.
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
