import { afterEach, describe, expect, it } from 'vitest'
import { createMemoryStore, type IdempotencyErrorCode, idempotencyErrorStatus } from '../../src'
import { type App, adapterDrivers, type Driver, type OpenOptions, type Reply } from './drivers'

/**
 * The contract's table ("What happens"), row by row, through every adapter behind a real server.
 * The central assertion is a count of the business handler's runs: the same key twice, once.
 * What is particular to one host (key sources, fingerprints, error shapes, streams, headers)
 * stays in that adapter's own tests.
 */
describe.each(adapterDrivers('adapters_behaviour'))('$driver.name', ({ driver, skip }) => {
  let app: App | undefined
  afterEach(async () => {
    await app?.close()
    app = undefined
  })
  const open = async (options?: OpenOptions) => {
    app = await driver.open(options)
    return app
  }

  it.skipIf(skip)(
    'leaves a call the host does not treat as a mutation untouched, key or not: it runs every time and the store is never called',
    async () => {
      const { send, ran, claims } = await open()
      const first = await send({ operation: 'read', key: 'k-read' })
      const second = await send({ operation: 'read', key: 'k-read' })
      expect(ran('read')).toBe(2)
      expect(claims()).toBe(0)
      for (const reply of [first, second]) expect(reply).toMatchObject({ ok: true, replay: null })
    },
  )

  it.skipIf(skip)('runs a mutation without a key on every call and records nothing', async () => {
    const { send, ran, claims } = await open()
    const replies = [await send(), await send()]
    expect(ran('create')).toBe(2)
    expect(claims()).toBe(0)
    expect(replies.map((reply) => [reply.status, reply.replay])).toEqual([
      [replies[0]!.status, null],
      [replies[0]!.status, null],
    ])
  })

  it.skipIf(skip)(
    'refuses a mutation without a key with 400 KEY_REQUIRED when a key is required, and does not run it',
    async () => {
      const { send, ran } = await open({ required: true })
      expectRefusal(driver, await send(), 'KEY_REQUIRED')
      expect(ran('create')).toBe(0)
    },
  )

  it.skipIf(skip)(
    'refuses an invalid key with 400 KEY_INVALID: nothing runs and the store is untouched',
    async () => {
      const { send, ran, claims } = await open()
      for (const key of ['two words', 'k'.repeat(256)]) {
        expectRefusal(driver, await send({ key }), 'KEY_INVALID')
      }
      expect(ran('create')).toBe(0)
      expect(claims()).toBe(0)
    },
  )

  it.skipIf(skip)(
    'runs a new key once and answers its retry with the recorded response, verbatim, with Idempotent-Replay: true',
    async () => {
      const { send, ran } = await open()
      const first = await send({ key: 'k-1' })
      const retry = await send({ key: 'k-1' })
      expect(ran('create')).toBe(1)
      expect(first).toMatchObject({ ok: true, status: driver.answers.ok, replay: null, code: null })
      expect(retry).toEqual({ ...first, replay: 'true' })
      const another = await send({ key: 'k-2' })
      expect(ran('create')).toBe(2)
      expect(another).toMatchObject({ ok: true, replay: null })
    },
  )

  it.skipIf(skip)(
    'refuses a retry whose payload changed with 422 KEY_REUSED and does not run it',
    async () => {
      const { send, ran } = await open()
      await send({ key: 'k-3', item: 'pen' })
      expectRefusal(driver, await send({ key: 'k-3', item: 'ink' }), 'KEY_REUSED')
      expect(ran('create')).toBe(1)
    },
  )

  it.skipIf(skip)(
    'answers concurrent duplicates with 409 IN_PROGRESS and Retry-After while the first runs, runs it once, then replays it',
    async () => {
      const { send, ran, release } = await open()
      const duplicates = 8
      let answered = 0
      let othersAnswered!: () => void
      const waiting = new Promise<void>((resolve) => {
        othersAnswered = resolve
      })
      const replies = Array.from({ length: duplicates }, () =>
        send({ operation: 'slow', key: 'k-4' }).then((reply) => {
          // The one that runs is held: every other reply comes back first.
          if (++answered === duplicates - 1) othersAnswered()
          return reply
        }),
      )
      await waiting
      release()
      const all = await Promise.all(replies)
      const conflicts = all.filter((reply) => reply.code === 'IN_PROGRESS')
      expect(conflicts).toHaveLength(duplicates - 1)
      for (const conflict of conflicts) {
        expectRefusal(driver, conflict, 'IN_PROGRESS')
        expect(conflict.retryAfter).toBe('1')
      }
      expect(ran('slow')).toBe(1)
      const winner = all.find((reply) => reply.code === null)!
      expect(winner).toMatchObject({ ok: true, status: driver.answers.ok, replay: null })
      const retry = await send({ operation: 'slow', key: 'k-4' })
      expect(retry).toEqual({ ...winner, replay: 'true' })
    },
  )

  it.skipIf(skip)(
    'refuses with 503 STORE_UNAVAILABLE and runs nothing when the store cannot be reached',
    async () => {
      const down = createMemoryStore()
      down.claim = async () => {
        throw new Error('connection refused')
      }
      const { send, ran } = await open({ store: down })
      expectRefusal(driver, await send({ key: 'k-5' }), 'STORE_UNAVAILABLE')
      expect(ran('create')).toBe(0)
    },
  )

  it.skipIf(skip)(
    'records a deterministic failure and replays it: the retry gets the same answer without running',
    async () => {
      const { send, ran } = await open()
      const first = await send({ operation: 'reject', key: 'k-6' })
      const retry = await send({ operation: 'reject', key: 'k-6' })
      expect(ran('reject')).toBe(1)
      expect(first).toMatchObject({ ok: false, status: driver.answers.rejected, replay: null })
      expect(first.body).toContain(driver.answers.rejection)
      expect(retry).toEqual({ ...first, replay: 'true' })
    },
  )

  it.skipIf(skip)(
    'releases the key after an unexpected failure: the retry runs again',
    async () => {
      const { send, ran } = await open()
      const first = await send({ operation: 'crash', key: 'k-7' })
      const retry = await send({ operation: 'crash', key: 'k-7' })
      expect(ran('crash')).toBe(2)
      for (const reply of [first, retry]) {
        expect(reply).toMatchObject({ ok: false, status: driver.answers.crashed, replay: null })
      }
    },
  )

  it.skipIf(skip)(
    'keeps one key from two callers, or on two operations, as unrelated operations',
    async () => {
      const { send, ran } = await open()
      const alice = await send({ key: 'k-8', user: 'alice' })
      const bob = await send({ key: 'k-8', user: 'bob' })
      expect(ran('create')).toBe(2)
      expect(bob).toMatchObject({ ok: true, replay: null })
      expect(await send({ key: 'k-8', user: 'alice' })).toEqual({ ...alice, replay: 'true' })
      const other = await send({ operation: 'other', key: 'k-8', user: 'alice' })
      expect(other).toMatchObject({ ok: true, replay: null })
      expect(ran('create')).toBe(3)
    },
  )
})

/** A refusal of the library: its status and code, in the host's idiom (SPEC, "What happens"). */
function expectRefusal(driver: Driver, reply: Reply, code: IdempotencyErrorCode): void {
  expect(reply.ok).toBe(false)
  expect(reply.status).toBe(idempotencyErrorStatus[code])
  expect(reply.code).toBe(code)
  expect(reply.idiom).toEqual(driver.refusal(code))
  expect(reply.replay).toBeNull()
}
