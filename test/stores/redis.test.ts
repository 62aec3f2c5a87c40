import { createHash, randomUUID } from 'node:crypto'
import { createRedisStore, type RedisStore } from 'idempotent-mutations/redis'
import type { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import {
  claimScript,
  completeScript,
  getScript,
  releaseScript,
  versionGuard,
} from '../../src/stores/redis/scripts'
import {
  type AnyRedisClient,
  claimInput,
  clientKinds,
  closeClient,
  connectIoRedis,
  connectNodeRedis,
  deletePrefixed,
  keysWithPrefix,
  noRedis,
  redisUrl,
  serverTime,
  uniquePrefix,
} from './redis-fixtures'
import { canStartRedis, type LocalRedisServer, startRedisServer } from './redis-servers'

const prefix = uniquePrefix('redis')
let admin: Redis

beforeAll(async () => {
  if (redisUrl) admin = await connectIoRedis()
})
afterAll(async () => {
  if (!admin) return
  await deletePrefixed(admin, prefix)
  admin.disconnect()
})

describe.skipIf(!redisUrl).each(clientKinds)(
  `[redis] Redis store through $name${noRedis}`,
  ({ name, library, connect }) => {
    let client: AnyRedisClient
    let store: RedisStore
    // Each client kind writes under its own sub-prefix so the layout assertions see only its keys.
    const ownPrefix = `${prefix}${name.replaceAll(' ', '-')}:`

    beforeAll(async () => {
      client = await connect()
      store = createRedisStore(client, { prefix: ownPrefix })
    })
    afterAll(() => closeClient(client))

    it('recognises the client library by its shape', () => {
      expect(store.library).toBe(library)
    })

    it('keeps each record as one string under <prefix>{<hash of scope and key>}: a JSON header line, then the response', async () => {
      const input = claimInput({
        key: 'has{braces}in-it\nand a "quoted" newline',
        lockTimeoutMs: 60_000,
        ttlMs: 3_600_000,
      })
      const claim = await store.claim(input)
      const recordKey = store.recordKey(input.scope, input.key)
      // One pair of braces, right after the prefix, around a hash of the length-prefixed parts:
      // however many braces the client's key has, Redis Cluster keeps the record on one slot.
      // Pinned exactly: the layout names stored data, so changing it strands existing records.
      const hash = createHash('sha256')
      for (const part of ['idempotent-mutations/redis/v3', input.scope, input.key]) {
        hash.update(`${part.length}:${part}`)
      }
      expect(recordKey).toBe(`${ownPrefix}{${hash.digest('base64url')}}`)
      expect(await keysWithPrefix(admin, ownPrefix)).toContain(recordKey)
      expect(await admin.type(recordKey)).toBe('string')
      // In progress: the header alone, its fields in this order (the scripts read by position).
      // It holds no time: expiresAt is the key's expiry, lockedUntil that less the lease field.
      const header = {
        status: 'in_progress',
        leaseToken: input.leaseToken,
        leaseEndsBeforeExpiryMs: 3_600_000 - 60_000,
        takeover: false,
        fingerprint: input.fingerprint,
        scope: input.scope,
        key: input.key,
      }
      expect(await admin.get(recordKey)).toBe(JSON.stringify(header))
      expect(Number(await admin.call('PEXPIRETIME', recordKey))).toBe(claim.record.expiresAt)

      // Completed: the status changes, the lease field becomes the completion's ttl, and the
      // response follows the first newline.
      await store.complete({ ...input, response: '{"json":"line 1\nline 2"}', ttlMs: 60_000 })
      const [storedHeader, ...rest] = (await admin.get(recordKey))?.split('\n') ?? []
      expect(JSON.parse(storedHeader ?? '')).toEqual({
        ...header,
        status: 'completed',
        leaseEndsBeforeExpiryMs: 60_000,
      })
      expect(Object.keys(JSON.parse(storedHeader ?? ''))).toEqual(Object.keys(header))
      expect(rest.join('\n')).toBe('{"json":"line 1\nline 2"}')
      expect(store.recordKey('["tenant-2","orders.create"]', input.key)).not.toBe(recordKey)
    })

    it("sets a Redis TTL that ends at the record's expiresAt: claim ttl, then completion ttl", async () => {
      // PEXPIRETIME (Redis 7) is the absolute expiry: compared exactly, with no clock involved.
      const expiry = async (recordKey: string) => Number(await admin.call('PEXPIRETIME', recordKey))
      const input = claimInput({ lockTimeoutMs: 60_000, ttlMs: 3_600_000 })
      const claim = await store.claim(input)
      const recordKey = store.recordKey(input.scope, input.key)
      expect(await expiry(recordKey)).toBe(claim.record.expiresAt)
      expect(claim.record.expiresAt - claim.record.lockedUntil).toBe(3_600_000 - 60_000)

      await store.complete({ ...input, response: 'r', ttlMs: 120_000 })
      const completed = await store.get(input.scope, input.key)
      expect(await expiry(recordKey)).toBe(completed?.expiresAt)
      expect(completed?.expiresAt).toBeLessThan(claim.record.expiresAt)
    })

    it('takes now, lockedUntil and expiresAt from the Redis server clock', async () => {
      const before = await serverTime(admin)
      const input = claimInput({ lockTimeoutMs: 45_000, ttlMs: 90_000 })
      const result = await store.claim(input)
      const after = await serverTime(admin)
      if (!result.claimed) throw new Error('expected a claim')
      const claimedAt = result.record.lockedUntil - 45_000
      expect(claimedAt).toBeGreaterThanOrEqual(before)
      expect(claimedAt).toBeLessThanOrEqual(after)
      expect(result.record.expiresAt).toBe(claimedAt + 90_000)

      const duplicate = await store.claim({ ...input, leaseToken: randomUUID() })
      if (duplicate.claimed) throw new Error('expected the standing record')
      expect(duplicate.now).toBeGreaterThanOrEqual(claimedAt)
      expect(duplicate.now).toBeLessThanOrEqual(await serverTime(admin))
    })

    it("reports a completed record's lockedUntil as the time it was completed, on the server clock", async () => {
      const input = claimInput({ lockTimeoutMs: 60_000, ttlMs: 3_600_000 })
      const claim = await store.claim(input)
      const before = await serverTime(admin)
      expect(await store.complete({ ...input, response: 'r', ttlMs: 120_000 })).toBe(true)
      const after = await serverTime(admin)
      const completed = await store.get(input.scope, input.key)
      // The lease ended when the outcome was recorded: expiresAt is that moment plus the ttl.
      expect(completed?.expiresAt).toBe((completed?.lockedUntil ?? 0) + 120_000)
      expect(completed?.lockedUntil).toBeGreaterThanOrEqual(before)
      expect(completed?.lockedUntil).toBeLessThanOrEqual(after)
      expect(completed?.lockedUntil).toBeLessThan(claim.record.lockedUntil)
      // A replay reads the same record.
      const replay = await store.claim({ ...input, leaseToken: randomUUID() })
      expect(replay).toMatchObject({ claimed: false, record: completed })
    })

    it('keeps a zero ttl for 1 ms, the shortest TTL Redis has', async () => {
      const input = claimInput({ lockTimeoutMs: 0, ttlMs: 0 })
      const claim = await store.claim(input)
      expect(claim).toMatchObject({ claimed: true, takeover: false })
      expect(claim.record.expiresAt - claim.record.lockedUntil).toBe(1)
      const again = claimInput({ lockTimeoutMs: 0, ttlMs: 60_000 })
      await store.claim(again)
      expect(await store.complete({ ...again, response: 'r', ttlMs: 0 })).toBe(true)
      // Gone within that millisecond: Redis deleted it, and another payload claims the key afresh.
      const recordKey = store.recordKey(again.scope, again.key)
      const deadline = Date.now() + 1_000
      while ((await admin.exists(recordKey)) === 1) {
        // A record with a 1 ms TTL still there after a second was never given that TTL.
        expect(Date.now()).toBeLessThan(deadline)
        await new Promise((resolve) => setImmediate(resolve))
      }
      expect(
        await store.claim({ ...again, leaseToken: randomUUID(), fingerprint: 'fp-2' }),
      ).toMatchObject({
        claimed: true,
        takeover: false,
      })
    })

    it('rounds durations to whole milliseconds, so a claim reports the times it stored', async () => {
      const input = claimInput({ lockTimeoutMs: 1_500.4, ttlMs: 60_000.6 })
      const claim = await store.claim(input)
      expect(claim.record.expiresAt - claim.record.lockedUntil).toBe(60_001 - 1_500)
      expect(await store.get(input.scope, input.key)).toEqual(claim.record)
    })

    it('replays a completed record in one script call that returns its response', async () => {
      const input = claimInput()
      await store.claim(input)
      await store.complete({ ...input, response: '{"json":{"id":1}}', ttlMs: 60_000 })
      const calls = spyOnScripts(client)
      const replay = await store.claim({ ...input, leaseToken: randomUUID() })
      expect(calls()).toBe(1)
      expect(replay).toMatchObject({
        claimed: false,
        record: {
          status: 'completed',
          response: '{"json":{"id":1}}',
          leaseToken: input.leaseToken,
        },
      })
    })

    it('answers a re-sent claim (same lease token) as claimed and changes nothing', async () => {
      // ioredis re-sends a command whose reply was lost to a reconnect; the claim then finds
      // its own token and must not turn its own caller into a 409.
      const input = claimInput()
      const first = await store.claim(input)
      const again = await store.claim(input)
      expect(again).toEqual(first)
      expect(await store.get(input.scope, input.key)).toEqual(first.claimed && first.record)

      // A re-sent takeover is answered as the takeover it was.
      const expired = claimInput({ lockTimeoutMs: 0 })
      await store.claim(expired)
      const takeover = { ...expired, leaseToken: randomUUID(), lockTimeoutMs: 60_000 }
      const taken = await store.claim(takeover)
      expect(taken).toMatchObject({ claimed: true, takeover: true })
      expect(await store.claim(takeover)).toEqual(taken)
    })

    it('does not let another payload take over an expired lease (a reused key)', async () => {
      // A zero lease has expired, on the server clock, for every later claim.
      const input = claimInput({ lockTimeoutMs: 0 })
      const original = await store.claim(input)
      const other = await store.claim({ ...input, leaseToken: randomUUID(), fingerprint: 'fp-2' })
      expect(other).toMatchObject({ claimed: false, record: original.record })
      expect(await store.get(input.scope, input.key)).toEqual(original.record)
    })

    it('fences by the whole lease token: a token that is a prefix of the holder’s, or the reverse, is refused', async () => {
      // The engine's tokens are `<prefix>.<base36 counter>`, so `x.1` is a prefix of `x.10`.
      for (const [holder, other] of [
        ['x.10', 'x.1'],
        ['x.1', 'x.10'],
        ['a', ''],
      ] as const) {
        const input = claimInput({ leaseToken: holder })
        const claimed = await store.claim(input)
        const intruder = { ...input, leaseToken: other }
        expect(await store.complete({ ...intruder, response: 'r', ttlMs: 60_000 })).toBe(false)
        expect(await store.release(intruder)).toBe(false)
        // Not the same claim re-sent: another caller, refused while the lease is valid.
        expect(await store.claim(intruder)).toMatchObject({ claimed: false })
        expect(await store.get(input.scope, input.key)).toEqual(claimed.record)
        expect(await store.complete({ ...input, response: 'r', ttlMs: 60_000 })).toBe(true)
      }
    })

    it('reads the standing lease from its own header when its token is longer or shorter than the claimer’s', async () => {
      for (const [holder, claimer] of [
        ['t', `t-${'x'.repeat(60)}`],
        [`t-${'x'.repeat(60)}`, 't'],
      ] as const) {
        // A zero lease has expired for every later claim; another payload must get it unchanged.
        const input = claimInput({ leaseToken: holder, lockTimeoutMs: 0 })
        const original = await store.claim(input)
        const other = await store.claim({ ...input, leaseToken: claimer, fingerprint: 'fp-2' })
        expect(other).toMatchObject({ claimed: false, record: original.record })
        // The same payload takes it over, with its own times.
        const taken = await store.claim({ ...input, leaseToken: claimer, lockTimeoutMs: 60_000 })
        expect(taken).toMatchObject({ claimed: true, takeover: true })
        expect(taken.record.lockedUntil).toBe(taken.record.expiresAt - input.ttlMs + 60_000)
        expect(await store.get(input.scope, input.key)).toEqual(taken.record)
      }
    })

    it('keeps tokens, keys, scopes and fingerprints that look like its own layout exactly', async () => {
      const awkward = [
        '',
        'a"',
        'a\\',
        'line\nbreak',
        '","expiresAt":1,"lockedUntil":2,',
        ',"leaseEndsBeforeExpiryMs":5,"takeover":false,',
        'é漢🙂',
      ]
      for (const text of awkward) {
        const input = claimInput({
          scope: `["${text}","op"]`,
          key: `k-${randomUUID()}${text}`,
          fingerprint: `fp${text}`,
          leaseToken: `t${text}`,
        })
        const claimed = await store.claim(input)
        expect(claimed).toMatchObject({ claimed: true, takeover: false })
        expect(await store.get(input.scope, input.key)).toEqual(claimed.record)
        const response = `{"json":"${text}"}\n{"status":"completed"}`
        expect(await store.complete({ ...input, response, ttlMs: 60_000 })).toBe(true)
        const replay = await store.claim({ ...input, leaseToken: randomUUID() })
        expect(replay).toMatchObject({
          claimed: false,
          record: {
            scope: input.scope,
            key: input.key,
            fingerprint: input.fingerprint,
            status: 'completed',
            response,
            leaseToken: input.leaseToken,
          },
        })
      }
    })

    it('does not take over an expired lease whose fingerprint only ends or starts like the claim’s', async () => {
      for (const [stored, claiming] of [
        ['xf', 'f'],
        ['f', 'xf'],
        ['a","scope":"s', 'a'],
        ['"', '\\"'],
      ] as const) {
        const input = claimInput({ fingerprint: stored, lockTimeoutMs: 0 })
        const original = await store.claim(input)
        const other = { ...input, fingerprint: claiming, leaseToken: randomUUID() }
        expect(await store.claim(other)).toMatchObject({ claimed: false, record: original.record })
        // The same payload still takes it over.
        expect(await store.claim({ ...input, leaseToken: randomUUID() })).toMatchObject({
          claimed: true,
          takeover: true,
        })
      }
    })

    it('keeps an empty response apart from a completion without a body', async () => {
      const empty = claimInput()
      const none = claimInput()
      await store.claim(empty)
      await store.claim(none)
      expect(await store.complete({ ...empty, response: '', ttlMs: 60_000 })).toBe(true)
      expect(await store.complete({ ...none, response: null, ttlMs: 60_000 })).toBe(true)
      expect(await store.get(empty.scope, empty.key)).toMatchObject({ response: '' })
      expect(await store.get(none.scope, none.key)).toMatchObject({
        status: 'completed',
        response: null,
      })
    })

    it('stores a response of over 1 MiB with non-ASCII text byte for byte', async () => {
      const input = claimInput()
      const response = JSON.stringify({ text: 'é漢字🙂\u0000"\\'.repeat(75_000) })
      expect(Buffer.byteLength(response)).toBeGreaterThan(1 << 20)
      await store.claim(input)
      await store.complete({ ...input, response, ttlMs: 60_000 })
      const replay = await store.claim({ ...input, leaseToken: randomUUID() })
      expect(replay.record.response).toBe(response)
    })

    it('rejects bad input with a stable code before anything is written', async () => {
      const input = claimInput({ lockTimeoutMs: Number.NaN })
      await expect(store.claim(input)).rejects.toMatchObject({
        name: 'TypeError',
        code: 'ERR_INVALID_ARG_VALUE',
      })
      await expect(
        store.claim({ ...claimInput(), key: 42 as unknown as string }),
      ).rejects.toMatchObject({ code: 'ERR_INVALID_ARG_TYPE' })
      expect(await store.get(input.scope, input.key)).toBeUndefined()
      // Past what Redis' PX takes (and a header must hold): refused here, not by Redis.
      for (const huge of [1e19, Number.MAX_VALUE, Number.POSITIVE_INFINITY]) {
        const tooLong = claimInput({ ttlMs: huge })
        await expect(store.claim(tooLong)).rejects.toMatchObject({ code: 'ERR_INVALID_ARG_VALUE' })
        await expect(store.claim({ ...claimInput(), lockTimeoutMs: huge })).rejects.toMatchObject({
          code: 'ERR_INVALID_ARG_VALUE',
        })
        expect(await store.get(tooLong.scope, tooLong.key)).toBeUndefined()
      }
      const held = claimInput()
      await store.claim(held)
      await expect(store.complete({ ...held, response: 'r', ttlMs: 1e19 })).rejects.toMatchObject({
        code: 'ERR_INVALID_ARG_VALUE',
      })
      expect(await store.get(held.scope, held.key)).toMatchObject({ status: 'in_progress' })
    })

    it('sweeps nothing, because Redis expires the records itself', async () => {
      const input = claimInput()
      await store.claim(input)
      expect(await store.sweep()).toBe(0)
      expect(await store.get(input.scope, input.key)).toMatchObject({ status: 'in_progress' })
    })
  },
)

describe.skipIf(!redisUrl)(`[redis] Redis version check${noRedis}`, () => {
  it('refuses a server before Redis 7.0 with an error that says so', async () => {
    // `redis.REDIS_VERSION_NUM` came with 7.0: hidden, the guard sees an older server.
    const olderServer =
      'local redis = setmetatable({ REDIS_VERSION_NUM = false }, { __index = redis })\n' +
      `${versionGuard}\nreturn 'ran'`
    await expect(admin.eval(olderServer, 0)).rejects.toThrow(
      'the Redis store needs Redis 7.0 or newer',
    )
    expect(await admin.eval(`${versionGuard}\nreturn 'ran'`, 0)).toBe('ran')
    // Every script that needs 7.0 (PEXPIRETIME, SET … NX GET) starts with the guard.
    for (const script of [claimScript, getScript]) {
      expect(script.source.startsWith(versionGuard)).toBe(true)
    }
    expect(completeScript.source + releaseScript.source).not.toMatch(/PEXPIRETIME|NX/)
  })
})

/** Claims through one store, completes through another, reads through the first: all one record. */
async function expectOneRecord(claimVia: RedisStore, completeVia: RedisStore) {
  const input = claimInput()
  expect(await claimVia.claim(input)).toMatchObject({ claimed: true })
  expect(await completeVia.complete({ ...input, response: 'done', ttlMs: 60_000 })).toBe(true)
  expect(await claimVia.get(input.scope, input.key)).toMatchObject({
    status: 'completed',
    response: 'done',
  })
}

describe.skipIf(!redisUrl)(`[redis] Redis store across clients${noRedis}`, () => {
  it('lets an ioredis and a node-redis client share the same records', async () => {
    const io = await connectIoRedis()
    const nodeRedis = await connectNodeRedis()
    try {
      await expectOneRecord(
        createRedisStore(io, { prefix: `${prefix}shared:` }),
        createRedisStore(nodeRedis, { prefix: `${prefix}shared:` }),
      )
    } finally {
      await closeClient(io)
      await closeClient(nodeRedis)
    }
  })

  it('runs through a node-redis 4 client in legacyMode, on its promise commands (v4)', async () => {
    const { createClient } = await import('redis4')
    const legacy = createClient({ url: redisUrl ?? '', legacyMode: true })
    legacy.on('error', () => {})
    await legacy.connect()
    try {
      const store = createRedisStore(legacy, { prefix: `${prefix}legacy:` })
      expect(store.library).toBe('node-redis')
      await expectOneRecord(store, store)
    } finally {
      await legacy.v4.quit()
    }
  })

  it('connects a lazyConnect ioredis client on its first call', async () => {
    const { Redis } = await import('ioredis')
    const lazy = new Redis(redisUrl ?? '', { lazyConnect: true })
    try {
      const store = createRedisStore(lazy, { prefix: `${prefix}lazy:` })
      expect(lazy.status).toBe('wait')
      expect(await store.claim(claimInput())).toMatchObject({ claimed: true })
    } finally {
      lazy.disconnect()
    }
  })
})

type ScriptMethod = (...args: unknown[]) => Promise<unknown>
type ScriptMethods = { evalsha: ScriptMethod; evalSha: ScriptMethod; eval: ScriptMethod }

/** Counts the script calls (EVALSHA or EVAL) a client sends from now on. */
function spyOnScripts(client: AnyRedisClient): () => number {
  const names =
    'evalsha' in client ? (['evalsha', 'eval'] as const) : (['evalSha', 'eval'] as const)
  const spies = names.map((name) => vi.spyOn(client as unknown as ScriptMethods, name))
  return () => {
    const count = spies.reduce((sum, spy) => sum + spy.mock.calls.length, 0)
    for (const spy of spies) spy.mockRestore()
    return count
  }
}

// SCRIPT FLUSH empties the script cache of the whole server: it runs on a server of this test's
// own, so that no other test (or run) sharing REDIS_URL sees its scripts vanish.
describe.skipIf(!redisUrl || !canStartRedis()).each(clientKinds)(
  `[redis] scripts after SCRIPT FLUSH, through $name, on a Redis of the test's own${noRedis}`,
  ({ library, connect }) => {
    let server: LocalRedisServer
    let client: AnyRedisClient
    beforeAll(async () => {
      server = await startRedisServer()
      client = await connect(server.url)
    })
    afterAll(async () => {
      if (client) await closeClient(client)
      await server?.stop()
    })

    it('runs a script with EVAL after SCRIPT FLUSH, then with EVALSHA again', async () => {
      const store = createRedisStore(client, { prefix: uniquePrefix('flush') })
      await store.claim(claimInput())
      await server.admin.script('FLUSH')
      const methods = client as unknown as ScriptMethods
      const evalSha = vi.spyOn(methods, library === 'ioredis' ? 'evalsha' : 'evalSha')
      const evalSource = vi.spyOn(methods, 'eval')
      try {
        const first = claimInput()
        expect(await store.claim(first)).toMatchObject({ claimed: true })
        expect(evalSha).toHaveBeenCalledTimes(1) // answered NOSCRIPT
        expect(evalSource).toHaveBeenCalledTimes(1) // ran the script and cached it
        expect(await store.claim(claimInput())).toMatchObject({ claimed: true })
        expect(evalSha).toHaveBeenCalledTimes(2)
        expect(evalSource).toHaveBeenCalledTimes(1)
        expect(await store.get(first.scope, first.key)).toMatchObject({ status: 'in_progress' })
      } finally {
        evalSha.mockRestore()
        evalSource.mockRestore()
      }
    })
  },
)
