/**
 * The records tables of the scale bench: made by the store's own `ensureTable()`, written by the
 * engine, and filled in bulk with rows shaped exactly like the ones the engine writes (one
 * `INSERT … SELECT … FROM generate_series`, copying a real record's scope, response and column
 * widths).
 */
import { randomUUID } from 'node:crypto'
import type { Library } from '../lib/build'
import type { PgDatabase } from '../lib/database'
import { orderInput } from '../sections/fixtures'

type Store = ReturnType<Library['drizzle']['createDrizzleStore']>

export interface ScaleTable {
  name: string
  /** Schema-qualified and quoted, for the bench's own SQL. */
  qualified: string
  store: Store
  /** A first execution through the engine (replay cache on): a new key, a 100-byte response. */
  firstExecution(): Promise<unknown>
}

/** What the handler answers: the codec stores it as a 100-byte response. */
const order = { id: 'order-0000001', item: 'standing desk', quantity: 2, total: 99.5 }

/** Creates table `name` in the run's schema with `ensureTable()`, on `db` (the run's pool). */
export async function createScaleTable(
  lib: Library,
  database: PgDatabase,
  name: string,
  db = database.db,
): Promise<ScaleTable> {
  const table = lib.drizzle.defineIdempotencyTable(name, database.schema)
  const store = lib.drizzle.createDrizzleStore(db, { table })
  await store.ensureTable()
  const idempotency = lib.core.createIdempotency({ store })
  return {
    name,
    qualified: `"${database.schema}"."${name}"`,
    store,
    firstExecution: () =>
      idempotency.execute(
        { key: randomUUID(), operation: 'orders.create', payload: orderInput },
        async () => order,
      ),
  }
}

/** A record the engine wrote, as the bulk rows copy it. */
export interface RecordShape {
  scope: string
  responseBytes: number
  fingerprintLength: number
  leaseTokenLength: number
  keyLength: number
}

const templateQuery = (
  t: string,
) => `select scope, response, octet_length(response) as "responseBytes",
    length(fingerprint) as "fingerprintLength", length(lease_token) as "leaseTokenLength",
    length(key) as "keyLength",
    extract(epoch from expires_at - locked_until) * 1000 as "lockToExpiryMs"
  from ${t} where status = 'completed' limit 1`

/** The ttl the rows' expiry times spread over: the engine's default. */
const ttlMs = 24 * 3600 * 1000

/**
 * When the inserted rows expire, relative to the statement's start: the first at `fromMs`, the
 * last at `toMs`, evenly between (rows are written in expiry order, as time writes them).
 */
export interface Expiry {
  fromMs: number
  toMs: number
}

/** Rows written over the last `ttl`, the oldest `expiredFraction` of them past their expiry. */
export const writtenOverTtl = (expiredFraction: number): Expiry => ({
  fromMs: -expiredFraction * ttlMs,
  toMs: (1 - expiredFraction) * ttlMs,
})

/** `rows` rows written just now, one a millisecond: they expire a `ttl` from now. */
export const writtenNow = (rows: number): Expiry => ({ fromMs: ttlMs, toMs: ttlMs + rows })

/**
 * Inserts `rows` completed records in one statement, expiring as `expiry` says. `table` must
 * hold one record the engine wrote, whose shape they copy. Resolves with the statement's seconds.
 */
export async function insertRecords(
  database: PgDatabase,
  table: ScaleTable,
  rows: number,
  expiry: Expiry,
): Promise<number> {
  const [template] = await database.query<
    RecordShape & { response: string; lockToExpiryMs: number }
  >(templateQuery(table.qualified))
  if (!template) throw new Error(`bench: ${table.name} holds no completed record to copy`)
  const startedAt = performance.now()
  await database.query(
    `insert into ${table.qualified}
      (scope, key, fingerprint, status, response, lease_token, locked_until, expires_at)
    select $1, gen_random_uuid()::text, lpad(i::text, $2, 'f'), 'completed', $3,
      lpad(i::text, $4, 'l'), expires_at - $5::float8 * interval '1 millisecond', expires_at
    from (select i, statement_timestamp() + ($7::float8
        + (i - 1)::float8 / $6::int * ($8::float8 - $7::float8)) * interval '1 millisecond'
        as expires_at
      from generate_series(1, $6::int) as i) as s`,
    [
      template.scope,
      template.fingerprintLength,
      template.response,
      template.leaseTokenLength,
      Number(template.lockToExpiryMs),
      rows,
      expiry.fromMs,
      expiry.toMs,
    ],
  )
  return seconds(startedAt)
}

/** The shape of the records `table` holds (one the engine wrote). */
export async function recordShape(database: PgDatabase, table: ScaleTable): Promise<RecordShape> {
  const [row] = await database.query<RecordShape>(templateQuery(table.qualified))
  if (!row) throw new Error(`bench: ${table.name} holds no completed record`)
  const { scope, responseBytes, fingerprintLength, leaseTokenLength, keyLength } = row
  return { scope, responseBytes, fingerprintLength, leaseTokenLength, keyLength }
}

export interface LoadResult {
  rows: number
  expired: number
  seconds: number
}

/**
 * Loads `rows` records written over the last `ttl`, the oldest `expiredFraction` of them
 * expired, into the table as it stands, indexes and all: an index built by CREATE INDEX after
 * a load packs its leaf pages full, where one that grew by inserts of random keys (UUIDs), as a
 * real table's primary key does, keeps them about two thirds full, and its size and the reuse
 * of its space are what the bench is after.
 */
export async function loadRecords(
  database: PgDatabase,
  table: ScaleTable,
  rows: number,
  expiredFraction: number,
): Promise<LoadResult> {
  const expired = Math.ceil(rows * expiredFraction)
  return {
    rows,
    expired,
    seconds: await insertRecords(database, table, rows, writtenOverTtl(expiredFraction)),
  }
}

export const seconds = (since: number) => Math.round(performance.now() - since) / 1000
