import { randomUUID } from 'node:crypto'
import { sql } from 'drizzle-orm'
import { getTableConfig } from 'drizzle-orm/pg-core'
import { describe, expect, it, vi } from 'vitest'
import { createIdempotency } from '../../src'
import type { DrizzlePgDatabase, DrizzleStore } from '../../src/stores/drizzle'
import { claimInput, type statementCounter } from './drizzle-fixtures'

export interface DrizzleBehaviourOptions {
  name: string
  /** A store over a new table, reached through a database whose statements `counter` counts. */
  createCountedStore(): Promise<DrizzleStore>
  counter: ReturnType<typeof statementCounter>
  /** A database for inspecting tables (catalog queries, aging records). */
  db(): DrizzlePgDatabase
}

type Row = Record<string, unknown>
const rowsOf = (result: unknown): Row[] =>
  Array.isArray(result) ? result : ((result as { rows: Row[] }).rows ?? [])

/** What the Drizzle store adds to the conformance suite: statement counts and its table. */
export function describeDrizzleBehaviour(options: DrizzleBehaviourOptions): void {
  const { counter } = options
  const query = async (statement: ReturnType<typeof sql>) =>
    rowsOf(await options.db().execute(statement))

  describe(`drizzle store: ${options.name}`, () => {
    it('a first execution costs two statements (claim, complete) and a replay one', async () => {
      const store = await options.createCountedStore()
      // Every retry reads the store here; the next test counts what the replay cache saves.
      const idempotency = createIdempotency({ store, replayCache: false })
      const request = { key: randomUUID(), operation: 'orders.create', payload: { amount: 5 } }
      const first = await counter.count(() => idempotency.execute(request, () => ({ id: 1 })))
      const replay = await counter.count(() => idempotency.execute(request, () => ({ id: 2 })))
      expect({ first, replay }).toEqual({ first: 2, replay: 1 })
    })

    it('with the replay cache (the default), retries after a completion in this process send no statement', async () => {
      const store = await options.createCountedStore()
      const writer = createIdempotency({ store })
      const reader = createIdempotency({ store })
      const request = { key: randomUUID(), operation: 'orders.create', payload: { amount: 5 } }
      const first = await counter.count(() => writer.execute(request, () => ({ id: 1 })))
      const replays = await counter.count(async () => {
        for (let i = 0; i < 3; i++) {
          expect(await writer.execute(request, () => ({ id: 2 }))).toEqual({
            value: { id: 1 },
            replayed: true,
          })
        }
      })
      // Another engine (another process) reads the record once, then answers from its copy.
      const elsewhere = await counter.count(async () => {
        for (let i = 0; i < 3; i++) {
          expect(await reader.execute(request, () => ({ id: 3 }))).toEqual({
            value: { id: 1 },
            replayed: true,
          })
        }
      })
      // Another payload under the key is refused from the copy as well.
      const reused = await counter.count(() =>
        expect(
          writer.execute({ ...request, payload: { amount: 6 } }, () => ({ id: 4 })),
        ).rejects.toMatchObject({ code: 'KEY_REUSED' }),
      )
      expect({ first, replays, elsewhere, reused }).toEqual({
        first: 2,
        replays: 0,
        elsewhere: 1,
        reused: 0,
      })
    })

    it('a failed execution costs two statements (claim, release)', async () => {
      const store = await options.createCountedStore()
      const idempotency = createIdempotency({ store })
      const request = { key: randomUUID(), operation: 'orders.create' }
      const statements = await counter.count(() =>
        idempotency
          .execute(request, () => {
            throw new Error('boom')
          })
          .catch(() => undefined),
      )
      expect(statements).toBe(2)
    })

    it('a claim refused by a standing record is one statement that writes nothing: no row lock, no new row version', async () => {
      const store = await options.createCountedStore()
      const { name, schema } = getTableConfig(store.table)
      const claim = claimInput()
      // A row lock would show as the locker's transaction id in xmax; a write as a new ctid.
      const version = async () =>
        (
          await query(
            sql`select ctid::text as ctid, xmin::text as xmin, xmax::text as xmax from ${sql.identifier(schema!)}.${sql.identifier(name)} where scope = 's' and key = ${claim.key}`,
          )
        )[0]
      expect((await store.claim(claim)).claimed).toBe(true)
      const inProgress = await version()
      expect(inProgress).toMatchObject({ xmax: '0' })
      const refused = await counter.count(async () => {
        // 409 (a live lease) and 422 (another payload under the key).
        expect(await store.claim({ ...claim, leaseToken: 'u' })).toMatchObject({
          claimed: false,
          record: { status: 'in_progress', leaseToken: 't' },
        })
        expect(await store.claim({ ...claim, leaseToken: 'v', fingerprint: 'g' })).toMatchObject({
          claimed: false,
          record: { fingerprint: 'f' },
        })
      })
      expect(refused).toBe(2)
      expect(await version()).toEqual(inProgress)

      expect(await store.complete({ ...claim, response: 'r' })).toBe(true)
      const completed = await version()
      const replayed = await counter.count(async () => {
        expect(await store.claim({ ...claim, leaseToken: 'w' })).toMatchObject({
          claimed: false,
          record: { status: 'completed', response: 'r' },
        })
      })
      expect(replayed).toBe(1)
      expect(await version()).toEqual(completed)

      // A lease that ran out, claimed with another payload: 422 from the first statement, which
      // reads the fingerprint, not a second one under the row lock.
      const lapsed = claimInput({ key: 'lapsed', lockTimeoutMs: 0 })
      expect((await store.claim(lapsed)).claimed).toBe(true)
      const reused = await counter.count(async () => {
        expect(await store.claim({ ...lapsed, leaseToken: 'u', fingerprint: 'g' })).toMatchObject({
          claimed: false,
          record: { fingerprint: 'f', leaseToken: 't' },
        })
      })
      expect(reused).toBe(1)
    })

    /** `count` completed records keyed `prefix-<i>`, aged past their expiry on the server. */
    const expiredRecords = async (store: DrizzleStore, prefix: string, count: number) => {
      for (let i = 0; i < count; i++) {
        const claim = { ...claimInput(), scope: 's', key: `${prefix}-${i}`, ttlMs: 60_000 }
        await store.claim(claim)
        await store.complete({ ...claim, response: 'r', ttlMs: 60_000 })
      }
      await ageRecords(store, `${prefix}-%`)
    }
    /** Moves the expiry of the records whose key is `like` into the past, on the server. */
    const ageRecords = async (store: DrizzleStore, like: string) => {
      const { name, schema } = getTableConfig(store.table)
      await query(
        sql`update ${sql.identifier(schema!)}.${sql.identifier(name)} set expires_at = now() - interval '1 second' where key like ${like}`,
      )
    }

    it('sweep deletes expired records with one statement per batch, paced if asked', async () => {
      const store = await options.createCountedStore()
      await expiredRecords(store, 'expired', 5)
      await store.claim({ ...claimInput(), scope: 's', key: 'live', ttlMs: 60_000 })
      let deleted = 0
      const statements = await counter.count(async () => {
        deleted = await store.sweep({ batchSize: 2 })
      })
      expect(deleted).toBe(5)
      // Batches of 2, 2 and 1: the short third batch shows nothing expired is left.
      expect(statements).toBe(3)
      expect(await store.get('s', 'live')).toMatchObject({ status: 'in_progress' })

      // Paced: a pause between two batches, none after the last. The pauses are the timers of
      // that length the sweep sets (37 ms: no other code here waits that long).
      await ageRecords(store, 'live')
      await expect(store.sweep({ pause: 'soon' as never })).rejects.toThrow(/sweep's pause must be/)
      expect(await store.get('s', 'live')).toBeDefined()
      await expiredRecords(store, 'paced', 4)
      const timers = vi.spyOn(globalThis, 'setTimeout')
      try {
        expect(await store.sweep({ batchSize: 2, pause: '37ms' })).toBe(5)
        expect(timers.mock.calls.filter(([, ms]) => ms === 37)).toHaveLength(2)
      } finally {
        timers.mockRestore()
      }
    })

    it('a signal stops a sweep between two batches, and its pause at once', async () => {
      const store = await options.createCountedStore()
      await expiredRecords(store, 'stopped', 4)
      // Aborted before, it deletes nothing; anything but an AbortSignal is refused.
      await expect(store.sweep({ signal: AbortSignal.abort() })).resolves.toBe(0)
      await expect(store.sweep({ signal: {} as AbortSignal })).rejects.toThrow(
        /sweep's signal must be an AbortSignal/,
      )
      const stop = new AbortController()
      // A pause far longer than the test may take: only the abort ends it.
      const sweeping = store.sweep({ batchSize: 2, pause: '1h', signal: stop.signal })
      // The first batch done: it waits in its pause.
      const { name, schema } = getTableConfig(store.table)
      await vi.waitFor(async () => {
        const [row] = await query(
          sql`select count(*)::int as n from ${sql.identifier(schema!)}.${sql.identifier(name)}`,
        )
        expect(Number((row as { n: number }).n)).toBe(2)
      })
      stop.abort()
      expect(await sweeping).toBe(2)
      expect(await store.sweep()).toBe(2)
    })

    it('ensureTable creates the columns, primary key and index the drizzle table defines, and can run again', async () => {
      const store = await options.createCountedStore()
      await Promise.all([store.ensureTable(), store.ensureTable(), store.ensureTable()])
      const { name, schema, columns } = getTableConfig(store.table)
      const actual = await query(sql`
        select column_name, data_type, is_nullable from information_schema.columns
        where table_schema = ${schema} and table_name = ${name} order by column_name`)
      const expected = columns
        .map((column) => ({
          column_name: column.name,
          data_type: column.getSQLType(),
          is_nullable: column.notNull ? 'NO' : 'YES',
        }))
        .sort((a, b) => a.column_name.localeCompare(b.column_name))
      expect(actual).toEqual(expected)
      const indexes = await query(sql`
        select indexname, indexdef from pg_indexes
        where schemaname = ${schema} and tablename = ${name} order by indexname`)
      expect(indexes.map((index) => index.indexname)).toEqual([
        `${name}_expires_at_idx`,
        `${name}_pkey`,
      ])
      expect(String(indexes[0]!.indexdef)).toContain('(expires_at)')
      expect(String(indexes[1]!.indexdef)).toMatch(/UNIQUE.*\(scope, key\)/)
    })
  })
}
