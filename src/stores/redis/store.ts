import { hashParts, jsonString } from '../../codec'
import {
  type ClaimInput,
  type ClaimResult,
  type CompleteInput,
  claimedRecord,
  type IdempotencyRecord,
  type IdempotencyStore,
  type ReleaseInput,
} from '../../store'
import { createScriptRunner, invalidArgument, type RedisClientLike } from './client'
import { claimScript, completeScript, getScript, releaseScript } from './scripts'

/** The key prefix records get when `prefix` is not given. */
export const defaultRedisPrefix = 'idem:'

export interface RedisStoreOptions {
  /**
   * Prepended to every record's key: `<prefix>{<hash of scope and key>}`. Use one prefix per
   * application sharing a Redis. It may not contain `{` or `}`: the braces after it are the
   * record's Redis Cluster hash tag.
   * @default 'idem:'
   */
  prefix?: string
  /**
   * Throw at once (the engine answers 503 `STORE_UNAVAILABLE`) when the client itself reports
   * that it is not connected: ioredis `status` other than `'ready'` (or `'wait'`, lazyConnect's
   * state before its first command), node-redis `isReady === false`. Without it, a call made
   * while the client is reconnecting waits in the client's offline queue, which with default
   * client settings can hold a request for a long time. Set `false` to leave it to the client's
   * own settings.
   * @default true
   */
  requireReady?: boolean
}

/** The Redis store: an {@link IdempotencyStore} plus where it keeps a record. */
export interface RedisStore extends IdempotencyStore {
  /** The Redis key of the record for `(scope, key)`, for inspection with redis-cli. */
  recordKey(scope: string, key: string): string
  /** Which client library was recognised. */
  readonly library: 'ioredis' | 'node-redis'
}

/**
 * An idempotency store on Redis (6.2 or newer), through a connected `ioredis` or node-redis v5
 * client.
 *
 * Each record is one Redis string, `<prefix>{<hash>}`: a JSON header line, then the response.
 * Redis deletes it at its `expiresAt` (`SET … PXAT`). Claim, completion and release are each
 * one Lua script, so each is atomic and one round trip; a replay is the claim's own answer.
 * Times come from the Redis server clock. `sweep()` has nothing to do and returns 0: Redis
 * expires the records itself.
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
      const ttlMs = wholeMilliseconds(input.ttlMs, 'ttlMs')
      // The header's tail, JSON-encoded here: the script only concatenates (see scripts.ts).
      const tail = `,"fingerprint":${jsonString(fingerprint)},"scope":${jsonString(scope)},"key":${jsonString(key)}}`
      const reply = await runner.run(claimScript, recordKey(scope, key), [
        jsonString(leaseToken),
        tail,
        String(lockTimeoutMs),
        String(ttlMs),
      ])

      if (!Array.isArray(reply)) return written(input, lockTimeoutMs, ttlMs, toNumber(reply), false)
      const outcome = text(reply[0])
      const now = toNumber(reply[1])
      if (outcome === 'existing') {
        return { claimed: false, record: toRecord(scope, key, reply[2], 'claim').record, now }
      }
      if (outcome === 'takeover') return written(input, lockTimeoutMs, ttlMs, now, true)
      if (outcome === 'resent') {
        const { record, takeover } = toRecord(scope, key, reply[2], 'claim')
        return { claimed: true, takeover, record }
      }
      throw unexpectedReply('claim', reply)
    },

    async complete(input: CompleteInput): Promise<boolean> {
      const { scope, key, leaseToken, response } = input
      checkString(scope, 'scope')
      checkString(key, 'key')
      checkString(leaseToken, 'leaseToken')
      const ttlMs = String(wholeMilliseconds(input.ttlMs, 'ttlMs'))
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
      return toRecord(scope, key, reply, 'get').record
    },

    // Redis deletes each record at its expiresAt (PXAT), and a claim also treats a record past
    // expiresAt as absent: there is nothing left to sweep.
    async sweep(): Promise<number> {
      return 0
    },
  }
}

/** A claim the script wrote: it computed the times from `now` and these same durations. */
function written(
  input: ClaimInput,
  lockTimeoutMs: number,
  ttlMs: number,
  now: number,
  takeover: boolean,
): ClaimResult {
  return { claimed: true, takeover, record: claimedRecord(input, now + lockTimeoutMs, now + ttlMs) }
}

/**
 * The record's hash tag: a SHA-256 of (scope, key), each part length-prefixed so no two pairs
 * meet. A record's one key then always lands on one cluster slot, whatever braces the client's
 * key contains. It names stored data, so it may only change with a new version tag (and a
 * migration note); test/stores/redis.test.ts pins the layout. v1 kept each record as a Redis
 * hash, v2 as one string: a v1 key read with GET would answer WRONGTYPE.
 */
function recordHash(scope: string, key: string): string {
  return hashParts('idempotent-mutations/redis/v2', scope, key)
}

function checkString(value: unknown, name: string): asserts value is string {
  if (typeof value !== 'string') {
    throw invalidArgument(`the Redis store needs \`${name}\` as a string`, 'ERR_INVALID_ARG_TYPE')
  }
}

/**
 * The longest duration the store takes, about 31,700 years: the server's now plus it stays an
 * exact integer in JavaScript, within Lua's '%d' and within what `SET … PXAT` accepts. A longer
 * one would make Redis refuse the write (a 503 for every claim) instead of a clear error here.
 */
const maxDurationMs = 1e15

/**
 * A duration as the scripts take it: whole milliseconds. The scripts format times with '%d', and
 * the client computes a new claim's times from the same numbers, so both agree to the millisecond.
 */
function wholeMilliseconds(value: unknown, name: string): number {
  if (typeof value !== 'number' || !(value >= 0 && value <= maxDurationMs)) {
    throw invalidArgument(
      `the Redis store needs \`${name}\` as a number of milliseconds from 0 to ${maxDurationMs}`,
    )
  }
  return Math.round(value)
}

// Replies are strings (or Buffers when a client maps them so), nil as null, integers as numbers.
function text(value: unknown): string | null {
  if (typeof value === 'string') return value
  if (value === null || value === undefined) return null
  if (value instanceof Uint8Array) return Buffer.from(value).toString('utf8')
  return String(value)
}

function toNumber(value: unknown): number {
  const number = typeof value === 'number' ? value : Number(text(value) ?? Number.NaN)
  if (!Number.isFinite(number)) throw unexpectedReply('claim', value)
  return number
}

function toFlag(reply: unknown, call: string): boolean {
  if (reply === 1) return true
  if (reply === 0) return false
  const value = text(reply)
  if (value !== '0' && value !== '1') throw unexpectedReply(call, reply)
  return value === '1'
}

interface StoredHeader {
  status: unknown
  leaseToken: unknown
  expiresAt: unknown
  lockedUntil: unknown
  takeover: unknown
  fingerprint: unknown
}

/** A stored record (see scripts.ts): its header line, then '\n' and the response, if any. */
function toRecord(
  scope: string,
  key: string,
  stored: unknown,
  call: string,
): { record: IdempotencyRecord; takeover: boolean } {
  const value = text(stored)
  if (value === null) throw unexpectedReply(call, stored)
  const newline = value.indexOf('\n')
  let header: StoredHeader
  try {
    header = JSON.parse(newline === -1 ? value : value.slice(0, newline)) ?? {}
  } catch {
    throw unexpectedReply(call, stored)
  }
  const { status, leaseToken, expiresAt, lockedUntil, fingerprint } = header
  if (
    (status !== 'in_progress' && status !== 'completed') ||
    typeof leaseToken !== 'string' ||
    typeof fingerprint !== 'string' ||
    typeof lockedUntil !== 'number' ||
    typeof expiresAt !== 'number'
  ) {
    throw unexpectedReply(call, stored)
  }
  return {
    record: {
      scope,
      key,
      fingerprint,
      status,
      response: newline === -1 ? null : value.slice(newline + 1),
      leaseToken,
      lockedUntil,
      expiresAt,
    },
    takeover: header.takeover === true,
  }
}

function unexpectedReply(call: string, reply: unknown): Error {
  return new Error(
    `idempotent-mutations: unexpected reply from the Redis ${call} script: ${JSON.stringify(reply)?.slice(0, 200)}`,
  )
}
