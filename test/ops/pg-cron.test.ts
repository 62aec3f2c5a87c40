import { readFileSync } from 'node:fs'
import { drizzle } from 'drizzle-orm/postgres-js'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createDrizzleStore, defineIdempotencyTable } from '../../src/stores/drizzle'
import { databaseUrl, testSchema } from '../support/env'

// The SQL a scheduler runs to sweep PostgreSQL without an app: one file, shipped in the package
// and quoted whole by docs/operating.md.
const sweepSql = readFileSync(
  new URL('../../src/stores/drizzle/sweep.sql', import.meta.url),
  'utf8',
)
const operating = readFileSync(new URL('../../docs/operating.md', import.meta.url), 'utf8')

describe('the sweep SQL for pg_cron', () => {
  it('docs/operating.md quotes src/stores/drizzle/sweep.sql as it is', () => {
    const blocks = [...operating.matchAll(/```sql\n([\s\S]*?)```/g)].map((match) => match[1])
    expect(blocks).toContain(sweepSql)
  })
})

const skipped = databaseUrl ? '' : ' (skipped: DATABASE_URL is not set)'

describe.skipIf(!databaseUrl)(`the sweep SQL on PostgreSQL [postgres]${skipped}`, () => {
  const schema = testSchema('im_test_pg_cron')
  const url = databaseUrl ?? 'postgres://unset'
  // The job runs where the table is found by its plain name, as it is in the public schema.
  const job = postgres(url, { max: 1, onnotice: () => {}, connection: { search_path: schema } })
  const other = postgres(url, { max: 2, onnotice: () => {} })
  const store = createDrizzleStore(drizzle({ client: other }), {
    table: defineIdempotencyTable('idempotency_keys', schema),
  })
  const table = `"${schema}"."idempotency_keys"`
  beforeAll(async () => {
    await other.unsafe(`drop schema if exists "${schema}" cascade`)
    await store.ensureTable()
  })
  afterAll(async () => {
    await other.unsafe(`drop schema if exists "${schema}" cascade`)
    await Promise.all([job.end(), other.end()])
  })

  /** Runs the file as pg_cron and psql do: one simple-protocol query, outside a transaction. */
  const runJob = () => job.unsafe(sweepSql).simple()
  const keys = async () =>
    (await other.unsafe(`select key from ${table} order by key`)).map((row) => row.key as string)
  /** `count` completed records that expired a second ago, keyed `<prefix><n>`. */
  const expired = (prefix: string, count: number) =>
    other.unsafe(
      `insert into ${table} select 's', $1 || i, 'f', 'completed', 'r', 't', now(), now() - interval '1 second'
       from generate_series(1, $2::int) as i`,
      [prefix, count],
    )

  it('deletes every expired record, batch after batch, and nothing that still counts', async () => {
    await expired('expired-', 2_345)
    const claim = (key: string, lockTimeoutMs: number, ttlMs = 3_600_000) =>
      store.claim({ scope: 's', key, fingerprint: 'f', leaseToken: key, lockTimeoutMs, ttlMs })
    await claim('live-in-progress', 60_000)
    await claim('lapsed-lease', 1) // its lease ended, but it counts until expires_at
    await claim('expired-in-progress', 1, 1)
    await claim('live-completed', 60_000)
    const completion = { scope: 's', key: 'live-completed', leaseToken: 'live-completed' }
    expect(await store.complete({ ...completion, response: 'r', ttlMs: 3_600_000 })).toBe(true)
    await claim('short-completed', 60_000)
    const short = { scope: 's', key: 'short-completed', leaseToken: 'short-completed' }
    expect(await store.complete({ ...short, response: 'r', ttlMs: 1 })).toBe(true)
    // Until both short-lived records have expired on the server's clock.
    for (;;) {
      const [row] = await other.unsafe(
        `select count(*)::int as live from ${table}
         where key in ('expired-in-progress', 'short-completed') and expires_at > statement_timestamp()`,
      )
      if (row?.live === 0) break
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
    await runJob()
    expect(await keys()).toEqual(['lapsed-lease', 'live-completed', 'live-in-progress'])
    // Nothing left that store.sweep() would delete.
    expect(await store.sweep()).toBe(0)
  })

  it('skips an expired record a transaction holds locked, without waiting, and the next run deletes it', async () => {
    await other.unsafe(`delete from ${table}`)
    await expired('locked-', 1)
    await expired('free-', 3)
    await other.begin(async (transaction) => {
      await transaction.unsafe(`select 1 from ${table} where key = 'locked-1' for update`)
      await runJob()
      expect(await job.unsafe(`select key from ${table}`)).toEqual([{ key: 'locked-1' }])
    })
    await runJob()
    expect(await keys()).toEqual([])
  })
})
