import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createIdempotency } from '../../src'
import { databaseUrl, testSchema } from '../support/env'
import { startApp } from './fixtures/app'
import { connect, createStore, dropSchema, executionsOf, resetSchema } from './fixtures/database'
import { createHttpClient, report } from './fixtures/http'
import { callOrder } from './fixtures/storm'

const schema = testSchema('im_rel_expiry')
const where = databaseUrl
  ? 'on PostgreSQL [postgres]'
  : 'on PGlite (DATABASE_URL is not set: the real-PostgreSQL run is skipped)'
const expiredRows = databaseUrl ? 30_000 : 20_000
const liveRows = 1_000
const batchSize = 1_000

describe(`expiry and sweeping ${where}`, () => {
  const database = connect({ url: databaseUrl, max: 6 })
  const http = createHttpClient()
  beforeAll(() => resetSchema(database, schema))
  afterAll(async () => {
    http.close()
    await dropSchema(database, schema)
    await database.close()
  })

  /** Waits until the record of `key` is past its expiry by the database's clock (a poll of state). */
  async function expired(table: string, key: string) {
    for (;;) {
      const [row] = await database.query<{ expired: boolean }>(
        `select expires_at <= now() as expired from "${schema}"."${table}" where key = '${key}'`,
      )
      if (row?.expired) return
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }

  it('a record past its ttl counts as absent: the key runs again, even with another payload', async () => {
    const store = await createStore(database.db, schema, 'keys_ttl')
    const app = await startApp({ db: database.db, schema, store, engine: { ttl: '300ms' } })
    try {
      const first = await callOrder(http, 'trpc', app.url, 'ttl-key', { item: 'book' })
      expect(first).toMatchObject({ status: 200, replay: false })
      const replay = await callOrder(http, 'trpc', app.url, 'ttl-key', { item: 'book' })
      expect(replay).toMatchObject({ status: 200, replay: true, value: first.value })
      await expired('keys_ttl', 'ttl-key')
      // Another payload under a live key would be 422 KEY_REUSED; under an expired one it runs.
      const again = await callOrder(http, 'trpc', app.url, 'ttl-key', { item: 'lamp' })
      expect(again).toMatchObject({ status: 200, replay: false })
      expect(again.value).not.toEqual(first.value)
      const executions = await executionsOf(database, schema, 'ttl-key')
      expect(executions).toHaveLength(2)
      report('record past ttl', { requests: 3, executions: executions.length })
    } finally {
      await app.close()
    }
  })

  it(`sweep() deletes ${expiredRows} expired records in statements of at most ${batchSize} while claims on other keys keep succeeding`, async () => {
    const table = 'keys_sweep'
    const store = await createStore(database.db, schema, table)
    const qualified = `"${schema}"."${table}"`
    // Every DELETE statement on the table logs how many rows it removed: the batches, as the
    // database saw them.
    await database.query(`create table "${schema}".sweep_log (
      id bigserial primary key, deleted int not null, at timestamptz not null default clock_timestamp())`)
    await database.query(`create function "${schema}".log_sweep() returns trigger language plpgsql as $$
      begin
        insert into "${schema}".sweep_log (deleted) select count(*) from gone;
        return null;
      end $$`)
    await database.query(`create trigger log_sweep after delete on ${qualified}
      referencing old table as gone for each statement execute function "${schema}".log_sweep()`)
    const rows = (status: string, from: number, count: number, expiresAt: string) =>
      database.query(`insert into ${qualified}
        (scope, key, fingerprint, status, response, lease_token, locked_until, expires_at)
        select '["","bulk"]', '${status}-' || g, 'fp', 'completed', '{"json":{"ok":true,"value":1}}',
          'token-' || g, now() - interval '1 day', ${expiresAt}
        from generate_series(${from}, ${from + count - 1}) g`)
    await rows('old', 1, expiredRows, `now() - interval '1 hour'`)
    await rows('live', 1, liveRows, `now() + interval '1 day'`)

    // `limit` stops the sweep exactly there, in batches.
    expect(await store.sweep({ batchSize: 500, limit: 1_200 })).toBe(1_200)
    const limited = await database.query<{ deleted: number }>(
      `select deleted from "${schema}".sweep_log order by id`,
    )
    expect(limited.map((row) => row.deleted)).toEqual([500, 500, 200])

    // Claims (through the engine, each running a handler and completing) go on in parallel
    // loops for as long as the sweep runs: new keys, and expired keys the sweep has not reached.
    const idempotency = createIdempotency({ store })
    let sweeping = true
    let claims = 0
    const loop = async (lane: number) => {
      for (let i = 0; sweeping; i++) {
        const key = i % 5 === 0 ? `old-${expiredRows - lane * 1_000 - i}` : `new-${lane}-${i}`
        const { value } = await idempotency.execute(
          { key, operation: 'bulk', payload: { lane, i } },
          async () => {
            await database.query(
              `insert into "${schema}".executions (scope, key, pid, size) values ('', '${key}', ${process.pid}, 0)`,
            )
            return key
          },
        )
        expect(value).toBe(key)
        claims++
      }
    }
    const lanes = [0, 1, 2].map(loop)
    const deleted = await store.sweep({ batchSize }).finally(() => {
      sweeping = false
    })
    await Promise.all(lanes)

    const batches = await database.query<{ deleted: number }>(
      `select deleted from "${schema}".sweep_log order by id offset 3`,
    )
    expect(batches.every((batch) => batch.deleted <= batchSize)).toBe(true)
    expect(batches.reduce((sum, batch) => sum + batch.deleted, 0)).toBe(deleted)
    expect(batches.length).toBeGreaterThanOrEqual(Math.ceil(deleted / batchSize))
    // Claims completed between the sweep's first and last batch: they were not blocked by it.
    const [overlap] = await database.query<{ during: number }>(
      `select count(*)::int as during from "${schema}".executions
        where at > (select min(at) from "${schema}".sweep_log where id > 3)
          and at < (select max(at) from "${schema}".sweep_log)`,
    )
    expect(claims).toBeGreaterThan(0)
    expect(overlap!.during).toBeGreaterThan(0)
    // What was live is still there: the 1,000 live rows and every claimed key, completed.
    const [left] = await database.query<{ live: number; claimed: number }>(
      `select count(*) filter (where key like 'live-%')::int as live,
        count(*) filter (where lease_token not like 'token-%' and status = 'completed')::int as claimed
        from ${qualified}`,
    )
    expect(left!.live).toBe(liveRows)
    expect(left!.claimed).toBe(claims)
    // Rows that claims held locked may be left for the next sweep; none is left after it.
    await store.sweep({ batchSize })
    const [after] = await database.query<{ expired: number }>(
      `select count(*)::int as expired from ${qualified} where expires_at <= now()`,
    )
    expect(after!.expired).toBe(0)
    report('sweep', {
      expiredRows,
      deleted,
      statements: batches.length,
      largestBatch: Math.max(...batches.map((b) => b.deleted)),
      concurrentClaims: claims,
      claimsDuringSweep: overlap!.during,
    })
  })
})
