import { hashParts } from '../../codec'
import type {
  ClaimInput,
  ClaimResult,
  CompleteInput,
  IdempotencyRecord,
  IdempotencyStore,
  RecordStatus,
  ReleaseInput,
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
 * An idempotency store on Redis, through a connected `ioredis` or node-redis v5 client.
 *
 * Each record is one Redis hash, `<prefix>{<hash>}`, that Redis deletes at its `expiresAt`
 * (`PEXPIREAT`). Claim, completion and release are each one Lua script, so each is atomic and
 * one round trip; a replay is the claim's own answer. Times come from the Redis server clock.
 * `sweep()` has nothing to do and returns 0: Redis expires the records itself.
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
      checkStrings({ scope, key })
      return recordKey(scope, key)
    },

    async claim(input: ClaimInput): Promise<ClaimResult> {
      checkStrings(input, 'scope', 'key', 'fingerprint', 'leaseToken')
      checkDurations(input, 'lockTimeoutMs', 'ttlMs')
      const reply = asArray(
        await runner.run(
          claimScript,
          [recordKey(input.scope, input.key)],
          [
            input.scope,
            input.key,
            input.fingerprint,
            input.leaseToken,
            String(input.lockTimeoutMs),
            String(input.ttlMs),
          ],
        ),
        'claim',
      )
      const fields = reply.map(text)
      const [outcome] = fields
      if (outcome === 'claimed') {
        const [, takeover, , lockedUntil, expiresAt] = fields
        return {
          claimed: true,
          takeover: takeover === '1',
          record: {
            scope: input.scope,
            key: input.key,
            fingerprint: input.fingerprint,
            status: 'in_progress',
            response: null,
            leaseToken: input.leaseToken,
            lockedUntil: toNumber(lockedUntil, 'claim'),
            expiresAt: toNumber(expiresAt, 'claim'),
          },
        }
      }
      if (outcome === 'existing') {
        const now = toNumber(fields[7], 'claim')
        return {
          claimed: false,
          record: toRecord(input.scope, input.key, fields.slice(1, 7), 'claim'),
          now,
        }
      }
      throw unexpectedReply('claim', reply)
    },

    async complete(input: CompleteInput): Promise<boolean> {
      checkStrings(input, 'scope', 'key', 'leaseToken')
      checkDurations(input, 'ttlMs')
      if (input.response !== null && typeof input.response !== 'string') {
        throw invalidArgument(
          'complete needs `response` as a string or null',
          'ERR_INVALID_ARG_TYPE',
        )
      }
      const reply = await runner.run(
        completeScript,
        [recordKey(input.scope, input.key)],
        [
          input.leaseToken,
          String(input.ttlMs),
          input.response === null ? '0' : '1',
          input.response ?? '',
        ],
      )
      return toFlag(reply, 'complete')
    },

    async release(input: ReleaseInput): Promise<boolean> {
      checkStrings(input, 'scope', 'key', 'leaseToken')
      const reply = await runner.run(
        releaseScript,
        [recordKey(input.scope, input.key)],
        [input.leaseToken],
      )
      return toFlag(reply, 'release')
    },

    async get(scope: string, key: string): Promise<IdempotencyRecord | undefined> {
      checkStrings({ scope, key })
      const reply = await runner.run(getScript, [recordKey(scope, key)], [])
      if (reply === null || reply === undefined) return undefined
      return toRecord(scope, key, asArray(reply, 'get'), 'get')
    },

    // Redis deletes each record at its expiresAt (PEXPIREAT), and a claim also treats a record
    // past expiresAt as absent: there is nothing left to sweep.
    async sweep(): Promise<number> {
      return 0
    },
  }
}

/**
 * The record's hash tag: a SHA-256 of (scope, key), each part length-prefixed so no two pairs
 * meet. A record's one key then always lands on one cluster slot, whatever braces the client's
 * key contains. It names stored data, so it may only change with a new version tag (and a
 * migration note); test/stores/redis.test.ts pins the layout.
 */
function recordHash(scope: string, key: string): string {
  return hashParts('idempotent-mutations/redis/v1', scope, key)
}

function checkStrings(input: object, ...names: string[]): void {
  const fields = input as Record<string, unknown>
  for (const name of names.length ? names : Object.keys(fields)) {
    if (typeof fields[name] !== 'string') {
      throw invalidArgument(`the Redis store needs \`${name}\` as a string`, 'ERR_INVALID_ARG_TYPE')
    }
  }
}

function checkDurations(input: object, ...names: string[]): void {
  const fields = input as Record<string, unknown>
  for (const name of names) {
    const value = fields[name]
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
      throw invalidArgument(
        `the Redis store needs \`${name}\` as a non-negative number of milliseconds`,
      )
    }
  }
}

// Replies are strings (or Buffers when a client maps them so), nil as null.
function text(value: unknown): string | null {
  if (value === null || value === undefined) return null
  if (typeof value === 'string') return value
  if (value instanceof Uint8Array) return Buffer.from(value).toString('utf8')
  return String(value)
}

function toNumber(value: string | null | undefined, call: string): number {
  const number = value === null || value === undefined ? Number.NaN : Number(value)
  if (!Number.isFinite(number)) throw unexpectedReply(call, value)
  return number
}

function asArray(reply: unknown, call: string): unknown[] {
  if (!Array.isArray(reply)) throw unexpectedReply(call, reply)
  return reply
}

function toFlag(reply: unknown, call: string): boolean {
  const value = Number(text(reply))
  if (value !== 0 && value !== 1) throw unexpectedReply(call, reply)
  return value === 1
}

function toRecord(scope: string, key: string, fields: unknown[], call: string): IdempotencyRecord {
  const [fingerprint, status, response, leaseToken, lockedUntil, expiresAt] = fields.map(text)
  if (
    fingerprint == null ||
    leaseToken == null ||
    (status !== 'in_progress' && status !== 'completed')
  ) {
    throw unexpectedReply(call, fields)
  }
  return {
    scope,
    key,
    fingerprint,
    status: status satisfies RecordStatus,
    response: response ?? null,
    leaseToken,
    lockedUntil: toNumber(lockedUntil, call),
    expiresAt: toNumber(expiresAt, call),
  }
}

function unexpectedReply(call: string, reply: unknown): Error {
  return new Error(
    `idempotent-mutations: unexpected reply from the Redis ${call} script: ${JSON.stringify(reply)?.slice(0, 200)}`,
  )
}
