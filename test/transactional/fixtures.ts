import { randomUUID } from 'node:crypto'
import { PGlite } from '@electric-sql/pglite'
import { and, count, eq, sql } from 'drizzle-orm'
import type { Cache } from 'drizzle-orm/cache/core'
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite'
import { drizzle } from 'drizzle-orm/postgres-js'
import postgres from 'postgres'
import { afterAll, beforeAll } from 'vitest'
import {
  createIdempotency,
  fingerprint,
  type IdempotencyEvent,
  type IdempotencyOptions,
} from '../../src'
import { createDrizzleStore, type DrizzleStore } from '../../src/stores/drizzle'
import { type AnyPgDatabase, defineTables, type Orders } from './tables'

/** Creates the schema and its tables; `orders.ref` is unique when `uniqueRef` (deferred to commit). */
async function createTables(db: AnyPgDatabase, schema: string, uniqueRef: boolean) {
  await db.execute(sql.raw(`drop schema if exists "${schema}" cascade`))
  await db.execute(sql.raw(`create schema "${schema}"`))
  // A unique constraint checked at COMMIT: how a test makes a commit fail on purpose.
  const unique = uniqueRef
    ? ', constraint orders_ref_unique unique (ref) deferrable initially deferred'
    : ''
  await db.execute(
    sql.raw(
      `create table "${schema}".orders (id serial primary key, ref text not null, item text not null${unique})`,
    ),
  )
}

/** The engine options every transactional fixture shares; events are recorded. */
function engineOptions(events: IdempotencyEvent[]) {
  return {
    logger: { warn: () => {}, error: () => {} },
    onEvent: (event: IdempotencyEvent) => void events.push(event),
  }
}

/**
 * A file's fixture on real PostgreSQL through postgres.js (`max` connections: waiting
 * duplicates each hold one), with helpers to read the business rows and records.
 */
export function usePostgres(
  url: string | undefined,
  schema: string,
  options: {
    max?: number
    uniqueRef?: boolean
    isolation?: 'serializable'
    /** A drizzle query cache in front of the store's database (the helpers read around it). */
    cache?: Cache
  } = {},
) {
  const client = postgres(url ?? 'postgres://unset', {
    max: options.max ?? 20,
    onnotice: () => {},
    // Run-time parameters of every connection, as a database default would set them.
    ...(options.isolation
      ? { connection: { default_transaction_isolation: options.isolation } }
      : {}),
  })
  const db = drizzle({ client })
  const storeDb = options.cache ? drizzle({ client, cache: options.cache }) : db
  // Behind a cache the store must go through drizzle's own query path, where a cache can answer:
  // without `$client` it cannot tell the driver and sends nothing past drizzle.
  if (options.cache) Reflect.deleteProperty(storeDb, '$client')
  const tables = defineTables(schema)
  const store = createDrizzleStore(storeDb, { table: tables.keys })
  beforeAll(async () => {
    await createTables(db, schema, options.uniqueRef ?? false)
    await store.ensureTable()
  })
  afterAll(async () => {
    await db.execute(sql.raw(`drop schema if exists "${schema}" cascade`))
    await client.end()
  })
  return { client, db, storeDb, schema, store, ...helpers(db, tables.orders, store) }
}

/** The same on PGlite (one embedded connection). */
export function usePglite(schema: string) {
  const client = new PGlite()
  const db = drizzlePglite({ client })
  const tables = defineTables(schema)
  const store = createDrizzleStore(db, { table: tables.keys })
  beforeAll(async () => {
    await createTables(db, schema, false)
    await store.ensureTable()
  })
  afterAll(() => client.close())
  return { client, db, store, ...helpers(db, tables.orders, store) }
}

function helpers<TTransaction>(
  db: AnyPgDatabase,
  orders: Orders,
  store: DrizzleStore<TTransaction>,
) {
  return {
    orders,
    /** A new transactional engine on this store; `events` collects its events. */
    engine(
      overrides: Omit<Partial<IdempotencyOptions<TTransaction>>, 'store'> = {},
      events: IdempotencyEvent[] = [],
    ) {
      return createIdempotency<TTransaction>({
        store,
        transactional: true,
        // Every replay here goes through the store's transactional claim; the replay cache in
        // front of it has its own tests (and one here that turns it on).
        replayCache: false,
        ...engineOptions(events),
        ...overrides,
      })
    },
    /** A key (and business `ref`) no other test uses. */
    newKey: (label: string) => `${label}-${randomUUID()}`,
    /** Committed business rows with this `ref`, read outside any transaction. */
    async ordersOf(ref: string) {
      return db.select().from(orders).where(eq(orders.ref, ref))
    },
    async orderCount(ref: string, item?: string) {
      const where =
        item === undefined ? eq(orders.ref, ref) : and(eq(orders.ref, ref), eq(orders.item, item))
      const [row] = await db.select({ n: count() }).from(orders).where(where)
      return row?.n ?? 0
    },
    /** The committed record of (scope, operation, key), as the engine names it. */
    recordOf(operation: string, key: string, scope = '') {
      return store.get(JSON.stringify([scope, operation]), key)
    },
  }
}

/** A promise the test settles by hand: a handler parked on it is mid-transaction. */
export function deferred<T = void>() {
  let resolve!: (value: T) => void
  const promise = new Promise<T>((res) => {
    resolve = res
  })
  return { promise, resolve }
}

/** A deterministic failure the engine records (4xx `status`). */
export class OutOfStock extends Error {
  override name = 'OutOfStock'
  readonly status = 422
  readonly code = 'OUT_OF_STOCK'
}

/**
 * Resolves once `atLeast` backends wait on a lock while running a statement on `table` (polls
 * pg_stat_activity; the statement's text names the table).
 */
export async function waitForLockWaiter(
  db: AnyPgDatabase,
  table: string,
  atLeast = 1,
): Promise<void> {
  for (;;) {
    const [row] = await db
      .select({ n: sql<number>`count(*)::int`.mapWith(Number) })
      .from(sql`pg_stat_activity`)
      .where(
        sql`datname = current_database() and wait_event_type = 'Lock'
        and position(${table} in query) > 0`,
      )
    if ((row?.n ?? 0) >= atLeast) return
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

/** Resolves once the database clock has passed `epochMs` (polls `now()`; leases use it). */
export async function untilServerTime(db: AnyPgDatabase, epochMs: number): Promise<void> {
  for (;;) {
    const [row] = await db
      .select({
        now: sql<number>`floor(extract(epoch from clock_timestamp()) * 1000)::float8`.mapWith(
          Number,
        ),
      })
      .from(sql`(select 1) as one`)
    if ((row?.now ?? 0) > epochMs) return
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

/**
 * A non-transactional claim of `key` for `operation` in the shared scope whose lease is over
 * (at once by default): the record a crashed executor leaves behind, for a takeover.
 */
export async function claimAsDeadExecutor(
  store: Pick<DrizzleStore<unknown>, 'claim'>,
  operation: string,
  key: string,
  payload: unknown = {},
  lockTimeoutMs = 0,
) {
  const dead = await store.claim({
    scope: JSON.stringify(['', operation]),
    key,
    fingerprint: fingerprint(payload),
    leaseToken: randomUUID(),
    lockTimeoutMs,
    ttlMs: 60_000,
  })
  if (!dead.claimed) throw new Error('the dead executor did not win its claim')
  return dead
}

export { defineTables, insertOrder, type Orders } from './tables'
