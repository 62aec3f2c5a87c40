import { hashParts, jsonString } from '../../hash'
import type {
  ClaimInput,
  ClaimResult,
  CompleteInput,
  IdempotencyRecord,
  InspectableStore,
  ReleaseInput,
  SweepOptions,
} from '../../store'
import {
  type PinnedInspection,
  type PinnedRecord,
  pinnedInspection,
  releaseKeyWith,
} from '../operator'
import { claimedRecord } from '../record'
import { sweepOptionsOf } from '../sweep'
import {
  createScriptRunner,
  invalidArgument,
  type RedisClientLike,
  type ScriptRunner,
} from './client'
import { text, toFlag, toNumber, toRecord, unexpectedReply } from './replies'
import {
  claimScript,
  completeScript,
  deletePinnedScript,
  getScript,
  headerThroughToken,
  inProgressHeader,
  inspectScript,
  releaseScript,
} from './scripts'

/** The key prefix records get when `prefix` is not given. */
export const defaultRedisPrefix = 'idem:'

export interface RedisStoreOptions {
  /**
   * Prepended to every record's key: `<prefix>{<hash of scope and key>}`. Use one prefix per
   * application sharing a Redis. It may not contain `{` or `}`: the braces after it are the
   * record's Redis Cluster hash tag.
   * @default 'idem:'
   */
  prefix?: string | undefined
  /**
   * Throw at once (the engine answers 503 `STORE_UNAVAILABLE`) when the client itself reports
   * that it is not connected: ioredis `status` other than `'ready'` (or `'wait'`, lazyConnect's
   * state before its first command), node-redis `isReady === false`. Without it, a call made
   * while the client is reconnecting waits in the client's offline queue, which with default
   * client settings can hold a request for a long time. Set `false` to leave it to the client's
   * own settings.
   * @default true
   */
  requireReady?: boolean | undefined
}

/** The Redis store: an {@link IdempotencyStore} plus where it keeps a record. */
export interface RedisStore extends InspectableStore {
  /** The Redis key of the record for `(scope, key)`, for inspection with redis-cli. */
  recordKey(scope: string, key: string): string
  /** Which client library was recognised. */
  readonly library: 'ioredis' | 'node-redis'
}

/**
 * An idempotency store on Redis (7.0 or newer), through a connected `ioredis` (5 or 6) or node-redis (4, 5 or 6)
 * client.
 *
 * Each record is one Redis string, `<prefix>{<hash>}`: a JSON header line, then the response.
 * Its `expiresAt` is the key's Redis expiry, so Redis deletes it then. Claim, completion and
 * release are each one Lua script, so each is atomic and one round trip; a replay is the
 * claim's own answer. Times come from the Redis server clock. `sweep()` has nothing to do and
 * returns 0: Redis expires the records itself.
 */
export function createRedisStore(
  client: RedisClientLike,
  options: RedisStoreOptions = {},
): RedisStore {
  const prefix = options.prefix ?? defaultRedisPrefix
  if (typeof prefix !== 'string' || /[{}]/.test(prefix)) {
    throw invalidArgument(
      `the Redis store's prefix must be a string without '{' or '}' (got ${JSON.stringify(prefix)}): the braces after it are the record's Redis Cluster hash tag`,
    )
  }
  const runner = createScriptRunner(client, options.requireReady ?? true)

  const recordKey = (scope: string, key: string) => `${prefix}{${recordHash(scope, key)}}`

  return {
    library: runner.library,
    recordKey(scope, key) {
      checkString(scope, 'scope')
      checkString(key, 'key')
      return recordKey(scope, key)
    },

    async claim(input: ClaimInput): Promise<ClaimResult> {
      const { scope, key, fingerprint, leaseToken } = input
      checkString(scope, 'scope')
      checkString(key, 'key')
      checkString(fingerprint, 'fingerprint')
      checkString(leaseToken, 'leaseToken')
      const lockTimeoutMs = wholeMilliseconds(input.lockTimeoutMs, 'lockTimeoutMs')
      const ttlMs = redisTtl(input.ttlMs)
      // What the header keeps instead of a time: lockedUntil = expiresAt - leaseEndsBeforeExpiryMs.
      const leaseEndsBeforeExpiryMs = ttlMs - lockTimeoutMs
      // The header is built here, its strings JSON-encoded: the script only writes it.
      const tail = `,"fingerprint":${jsonString(fingerprint)},"scope":${jsonString(scope)},"key":${jsonString(key)}}`
      const token = jsonString(leaseToken)
      const reply = await runner.run(claimScript, recordKey(scope, key), [
        token,
        inProgressHeader(token, leaseEndsBeforeExpiryMs, tail),
        String(ttlMs),
      ])
      return claimAnswer(input, reply, leaseEndsBeforeExpiryMs)
    },

    async complete(input: CompleteInput): Promise<boolean> {
      const { scope, key, leaseToken, response } = input
      checkString(scope, 'scope')
      checkString(key, 'key')
      checkString(leaseToken, 'leaseToken')
      const ttlMs = String(redisTtl(input.ttlMs))
      if (response !== null && typeof response !== 'string') {
        throw invalidArgument(
          'complete needs `response` as a string or null',
          'ERR_INVALID_ARG_TYPE',
        )
      }
      const token = jsonString(leaseToken)
      const reply = await runner.run(
        completeScript,
        recordKey(scope, key),
        response === null ? [token, ttlMs] : [token, ttlMs, response],
      )
      return toFlag(reply, 'complete')
    },

    async release(input: ReleaseInput): Promise<boolean> {
      const { scope, key, leaseToken } = input
      checkString(scope, 'scope')
      checkString(key, 'key')
      checkString(leaseToken, 'leaseToken')
      const reply = await runner.run(releaseScript, recordKey(scope, key), [jsonString(leaseToken)])
      return toFlag(reply, 'release')
    },

    async get(scope: string, key: string): Promise<IdempotencyRecord | undefined> {
      checkString(scope, 'scope')
      checkString(key, 'key')
      const reply = await runner.run(getScript, recordKey(scope, key), [])
      if (reply === null || reply === undefined) return undefined
      if (!Array.isArray(reply)) throw unexpectedReply('get', reply)
      return toRecord(scope, key, reply[1], toNumber(reply[0], 'get'), 'get').record
    },

    ...operatorCalls(runner, recordKey),

    // Redis deletes each record at its expiresAt (its key's expiry), and no script sees a key
    // past it: there is nothing left to sweep.
    async sweep(options?: SweepOptions): Promise<number> {
      sweepOptionsOf(options)
      return 0
    },
  }
}

/** `inspect` and `releaseKey`: the record read by one script, deleted pinned by another. */
function operatorCalls(
  runner: ScriptRunner,
  recordKey: (scope: string, key: string) => string,
): Pick<RedisStore, 'inspect' | 'releaseKey'> {
  const inspect = async (scope: string, key: string): Promise<PinnedInspection | undefined> => {
    checkString(scope, 'scope')
    checkString(key, 'key')
    const reply = await runner.run(inspectScript, recordKey(scope, key), [])
    if (reply === null || reply === undefined) return undefined
    if (!Array.isArray(reply)) throw unexpectedReply('inspect', reply)
    const expiresAt = toNumber(reply[0], 'inspect')
    const { record } = toRecord(scope, key, reply[1], expiresAt, 'inspect')
    const responseBytes = Number(text(reply[2]))
    return pinnedInspection(record, {
      expiresAt,
      now: toNumber(reply[3], 'inspect'),
      responseBytes: responseBytes >= 0 ? responseBytes : null,
    })
  }
  const deletePinned = async ({ scope, key, leaseToken, status }: PinnedRecord) => {
    const start = headerThroughToken(status, jsonString(leaseToken))
    return toFlag(
      await runner.run(deletePinnedScript, recordKey(scope, key), [start]),
      'releaseKey',
    )
  }
  return {
    inspect: async (scope, key) => (await inspect(scope, key))?.inspection,
    releaseKey: (scope, key, options) => releaseKeyWith(scope, key, options, inspect, deletePinned),
  }
}

/** What the claim script answered, as `claim` reports it. */
function claimAnswer(
  input: ClaimInput,
  reply: unknown,
  /** lockedUntil = expiresAt - leaseEndsBeforeExpiryMs */
  leaseEndsBeforeExpiryMs: number,
): ClaimResult {
  const { scope, key } = input
  // The common case: claimed, answered with the new record's expiry alone.
  if (!Array.isArray(reply)) {
    const expiresAt = toNumber(reply, 'claim')
    return written(input, expiresAt - leaseEndsBeforeExpiryMs, expiresAt, false)
  }
  const outcome = text(reply[0])
  if (outcome === 'existing') {
    const { record } = toRecord(scope, key, reply[3], toNumber(reply[2], 'claim'), 'claim')
    return { claimed: false, record, now: toNumber(reply[1], 'claim') }
  }
  if (outcome === 'takeover') {
    const expiresAt = toNumber(reply[1], 'claim')
    return written(input, expiresAt - leaseEndsBeforeExpiryMs, expiresAt, true)
  }
  if (outcome === 'resent') {
    const { record, takeover } = toRecord(
      scope,
      key,
      reply[2],
      toNumber(reply[1], 'claim'),
      'claim',
    )
    return { claimed: true, takeover, record }
  }
  throw unexpectedReply('claim', reply)
}

/** A claim the script wrote; its times follow from its key's expiry, as `toRecord` derives them. */
function written(
  input: ClaimInput,
  lockedUntil: number,
  expiresAt: number,
  takeover: boolean,
): ClaimResult {
  return { claimed: true, takeover, record: claimedRecord(input, lockedUntil, expiresAt) }
}

/**
 * The record's hash tag: a SHA-256 of (scope, key), each part length-prefixed so no two pairs
 * meet. A record's one key then always lands on one cluster slot, whatever braces the client's
 * key contains. It names stored data, so it may only change with a new version tag (and a
 * migration note); test/stores/redis.test.ts pins the layout. v1 kept each record as a Redis
 * hash, v2 as one string with absolute times in its header, v3 as one string whose header holds
 * no time (its key's expiry is expiresAt): a v2 header read as v3 would give wrong times.
 */
function recordHash(scope: string, key: string): string {
  return hashParts('idempotent-mutations/redis/v3', scope, key)
}

function checkString(value: unknown, name: string): asserts value is string {
  if (typeof value !== 'string') {
    throw invalidArgument(`the Redis store needs \`${name}\` as a string`, 'ERR_INVALID_ARG_TYPE')
  }
}

/**
 * The longest duration the store takes, about 31,700 years: the server's now plus it stays an
 * exact integer in JavaScript and in Lua, and within what `SET … PX` accepts. A longer one would
 * make Redis refuse the write (a 503 for every claim) instead of a clear error here.
 */
const maxDurationMs = 1e15

/**
 * A duration as the scripts take it: whole milliseconds. The scripts only pass the client's
 * strings on to Redis, and the client derives a new claim's times from the same numbers, so
 * both agree to the millisecond.
 */
function wholeMilliseconds(value: unknown, name: string): number {
  if (typeof value !== 'number' || !(value >= 0 && value <= maxDurationMs)) {
    throw invalidArgument(
      `the Redis store needs \`${name}\` as a number of milliseconds from 0 to ${maxDurationMs}`,
    )
  }
  return Math.round(value)
}

/**
 * A record's lifetime as `SET … PX` takes it. Redis has no zero TTL (PX 0 is an error), so a
 * zero ttl is kept for 1 ms: the record then expires at once for every later call.
 */
function redisTtl(value: unknown): number {
  return Math.max(1, wholeMilliseconds(value, 'ttlMs'))
}
