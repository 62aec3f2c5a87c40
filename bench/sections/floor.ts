/**
 * The hand-written floors the library is measured against: the least SQL that still runs a key
 * once. One statement claims the key or returns its record, the business insert runs, one
 * update completes the record; a replay is answered from the record the claim returns. No
 * fingerprint, lease token, expiry, takeover or error recording.
 *
 * The same floor on a table of the SPEC's record (its eight columns, the `expires_at` index,
 * the store's parameters) shows how much of the library's cost the record's shape accounts for.
 */

/** Runs one parameterized statement (prepared, on whatever connection the caller holds). */
export type Query = <Row = Record<string, unknown>>(
  text: string,
  params: unknown[],
) => Promise<Row[]>

export interface OrderInput {
  item: string
  quantity: number
}

export interface OrderRow {
  id: string
  item: string
  quantity: number
}

/** The business table and the floors' tables, in `schema`. */
export async function createFloorTables(query: Query, schema: string): Promise<void> {
  await query(
    `create table "${schema}".orders (
      id bigint generated always as identity primary key,
      item text not null,
      quantity int not null,
      created_at timestamptz not null default now())`,
    [],
  )
  await query(
    `create table "${schema}".floor_keys (key text primary key, status text not null, response text)`,
    [],
  )
  await query(
    `create table "${schema}".floor_records (
      scope text not null, key text not null, fingerprint text not null, status text not null,
      response text, lease_token text not null, locked_until timestamptz not null,
      expires_at timestamptz not null, primary key (scope, key))`,
    [],
  )
  await query(`create index on "${schema}".floor_records (expires_at)`, [])
}

/** The business statement every variant runs: insert one order, return it. */
export const insertOrderSql = (schema: string) =>
  `insert into "${schema}".orders (item, quantity) values ($1, $2)
   returning id::text as id, item, quantity`

export async function insertOrder(query: Query, schema: string, input: OrderInput) {
  const [row] = await query<OrderRow>(insertOrderSql(schema), [input.item, input.quantity])
  return row!
}

/** The floor's claim and completion, on the minimal table or on the SPEC's record. */
function floorSql(schema: string) {
  const claim = (table: string, values: string, conflict: string, where: string) =>
    `with claimed as (
      insert into "${schema}".${table} values ${values}
      on conflict ${conflict} do nothing
      returning status, response)
    select true as claimed, status, response from claimed
    union all
    select false, status, response from "${schema}".${table}
    where ${where} and not exists (select 1 from claimed)`
  return {
    claim: claim('floor_keys', `($1, 'in_progress')`, '(key)', 'key = $1'),
    complete: `update "${schema}".floor_keys set status = 'completed', response = $2 where key = $1`,
    // What the store's statements must write and compare at least (scope, fingerprint, lease
    // token, server-clock lease and expiry), and no more.
    claimSpec: claim(
      'floor_records',
      `($1, $2, $3, 'in_progress', null, $4,
        statement_timestamp() + $5::float8 * interval '1 millisecond',
        statement_timestamp() + $6::float8 * interval '1 millisecond')`,
      '(scope, key)',
      'scope = $1 and key = $2',
    ),
    completeSpec: `update "${schema}".floor_records set status = 'completed',
      response = $4, expires_at = statement_timestamp() + $5::float8 * interval '1 millisecond'
      where scope = $1 and key = $2 and status = 'in_progress' and lease_token = $3
      returning key`,
  }
}

const specRecord = { fingerprint: 'a'.repeat(43), lockTimeoutMs: 60_000, ttlMs: 86_400_000 }

/**
 * A keyed call through the floor: `mutate` runs once per key, a completed key answers its
 * recorded value, a key in progress throws. `query` runs every statement; inside a
 * transaction it is the transaction's.
 */
export function createFloor(schema: string) {
  const sql = floorSql(schema)
  return async function floor<T>(
    query: Query,
    key: string,
    mutate: () => Promise<T>,
    onSpecRecord = false,
  ): Promise<T> {
    const token = `lease-${key}`
    const [record] = await query<{ claimed: boolean; status: string; response: string | null }>(
      onSpecRecord ? sql.claimSpec : sql.claim,
      onSpecRecord
        ? ['', key, specRecord.fingerprint, token, specRecord.lockTimeoutMs, specRecord.ttlMs]
        : [key],
    )
    if (record?.claimed) {
      const value = await mutate()
      const response = JSON.stringify(value)
      if (onSpecRecord) {
        await query(sql.completeSpec, ['', key, token, response, specRecord.ttlMs])
      } else {
        await query(sql.complete, [key, response])
      }
      return value
    }
    if (record?.status === 'completed' && record.response !== null) {
      return JSON.parse(record.response) as T
    }
    throw new Error('in progress')
  }
}
