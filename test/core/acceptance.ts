import { randomUUID } from 'node:crypto'
import { sql } from 'drizzle-orm'
import { beforeAll, describe, expect, it } from 'vitest'
import {
  createIdempotency,
  type IdempotencyEvent,
  type IdempotencyOptions,
  isIdempotencyError,
} from '../../src'
import type { DrizzlePgDatabase, DrizzleStore } from '../../src/stores/drizzle'
import { deferred } from './fixtures'

export interface AcceptanceOptions {
  name: string
  db(): DrizzlePgDatabase
  /** This file's own schema (created by the store fixture); the effects table goes there too. */
  schema: string
  createStore(): Promise<DrizzleStore>
  concurrency: number
}

type Row = Record<string, unknown>
const rowsOf = (result: unknown): Row[] =>
  Array.isArray(result) ? result : ((result as { rows: Row[] }).rows ?? [])

/**
 * SPEC's acceptance through the engine on the Drizzle store: duplicates run once (counted in
 * the database, where a second execution would show), payload checks, and a takeover that
 * fences the old executor off.
 */
export function describeAcceptance(options: AcceptanceOptions): void {
  const effects = sql`${sql.identifier(options.schema)}.effects`
  const db = () => options.db()

  describe(`engine acceptance: ${options.name}`, () => {
    beforeAll(async () => {
      await db().execute(sql`create schema if not exists ${sql.identifier(options.schema)}`)
      await db().execute(
        sql`create table if not exists ${effects} (key text not null, executor text not null)`,
      )
    })

    /** The side effect of a handler: one row per execution. */
    const recordEffect = (key: string, executor: string) =>
      db().execute(sql`insert into ${effects} (key, executor) values (${key}, ${executor})`)
    const executions = async (key: string) =>
      rowsOf(await db().execute(sql`select executor from ${effects} where key = ${key}`)).map(
        (row) => row.executor,
      )

    async function engine(extra: Partial<IdempotencyOptions> = {}) {
      const events: IdempotencyEvent[] = []
      const idempotency = createIdempotency({
        store: await options.createStore(),
        logger: { warn: () => {}, error: () => {} },
        onEvent: (event) => void events.push(event),
        // Every retry here reads the store; the replay cache in front of it has its own tests.
        replayCache: false,
        ...extra,
      })
      return { idempotency, events }
    }

    it(`${options.concurrency} concurrent duplicates of one keyed operation run the handler exactly once`, async () => {
      const { idempotency } = await engine()
      const key = randomUUID()
      const request = { key, operation: 'orders.create', payload: { amount: 5 } }
      const settled = await Promise.allSettled(
        Array.from({ length: options.concurrency }, (_, i) =>
          idempotency.execute(request, async () => {
            await recordEffect(key, `caller-${i}`)
            return { orderId: `order-of-caller-${i}` }
          }),
        ),
      )
      const ran = await executions(key)
      expect(ran).toHaveLength(1)
      const winner = { orderId: `order-of-${ran[0]}` }
      for (const outcome of settled) {
        if (outcome.status === 'fulfilled') expect(outcome.value.value).toEqual(winner)
        else expect(outcome.reason).toMatchObject({ code: 'IN_PROGRESS', status: 409 })
      }
      const retry = await idempotency.execute(request, () => ({ orderId: 'never' }))
      expect(retry).toEqual({ value: winner, replayed: true })
    })

    it(`${options.concurrency} concurrent duplicates that wait all get the one outcome`, async () => {
      const { idempotency } = await engine({ concurrency: 'wait' })
      const key = randomUUID()
      const request = { key, operation: 'orders.create', payload: { amount: 5 } }
      const results = await Promise.all(
        Array.from({ length: options.concurrency }, (_, i) =>
          idempotency.execute(request, async () => {
            await recordEffect(key, `caller-${i}`)
            return `outcome of caller-${i}`
          }),
        ),
      )
      const ran = await executions(key)
      expect(ran).toHaveLength(1)
      expect(new Set(results.map((result) => result.value))).toEqual(
        new Set([`outcome of ${ran[0]}`]),
      )
      expect(results.filter((result) => !result.replayed)).toHaveLength(1)
    })

    it('a retry with the payload fields reordered replays; a changed payload gets 422 KEY_REUSED', async () => {
      const { idempotency } = await engine()
      const key = randomUUID()
      const handler = async () => {
        await recordEffect(key, 'only')
        return new Date('2030-01-01T00:00:00Z')
      }
      await idempotency.execute(
        { key, operation: 'orders.create', payload: { amount: 5, items: [{ sku: 'a', n: 1 }] } },
        handler,
      )
      const replay = await idempotency.execute(
        { key, operation: 'orders.create', payload: { items: [{ n: 1, sku: 'a' }], amount: 5 } },
        handler,
      )
      expect(replay.replayed).toBe(true)
      expect(replay.value).toEqual(new Date('2030-01-01T00:00:00Z'))
      const changed = await idempotency
        .execute({ key, operation: 'orders.create', payload: { amount: 6, items: [] } }, handler)
        .catch((error: unknown) => error)
      expect(isIdempotencyError(changed) && changed.code).toBe('KEY_REUSED')
      expect(changed).toMatchObject({ status: 422 })
      expect(await executions(key)).toEqual(['only'])
    })

    it('an expired lease is taken over, and the old executor cannot overwrite the new result', async () => {
      const { idempotency, events } = await engine({ lockTimeout: 50, waitTimeout: '20s' })
      const key = randomUUID()
      const request = { key, operation: 'orders.create', payload: { amount: 5 } }
      const started = deferred()
      const slow = deferred()
      const first = idempotency.execute(request, async () => {
        await recordEffect(key, 'first')
        started.resolve()
        await slow.promise
        return 'first outcome'
      })
      await started.promise
      // Waits on the server clock until the 50 ms lease is over, then takes the key over.
      const second = await idempotency.execute(
        { ...request, concurrency: 'wait' },
        async (context) => {
          await recordEffect(key, context.takeover ? 'second (takeover)' : 'second')
          return 'second outcome'
        },
      )
      expect(second).toEqual({ value: 'second outcome', replayed: false })
      slow.resolve()
      expect(await first).toEqual({ value: 'first outcome', replayed: false })
      expect(events.map((event) => event.type)).toEqual([
        'takeover',
        'executed',
        'lost-lease',
        'executed',
      ])
      expect(await executions(key)).toEqual(['first', 'second (takeover)'])
      const retry = await idempotency.execute(request, () => 'never')
      expect(retry).toEqual({ value: 'second outcome', replayed: true })
    })
  })
}
