import { createHash } from 'node:crypto'

/** A Lua script with its SHA1, the name `EVALSHA` knows it by. */
export interface LuaScript {
  readonly name: string
  readonly source: string
  readonly sha1: string
}

function script(name: string, source: string): LuaScript {
  return { name, source, sha1: createHash('sha1').update(source).digest('hex') }
}

// Shared prologue. Every time comes from the Redis server's clock (TIME), so app servers with
// skewed clocks agree on leases and expiry. Redis < 5 only allows TIME before a write when the
// script replicates its effects rather than itself; from Redis 5 that is the default and the
// call is a no-op. Numbers go out as '%.0f' strings: Lua turns a number into an integer reply
// by truncating it, and tostring() would print 1.7e+12.
const prologue = `
if redis.replicate_commands then pcall(redis.replicate_commands) end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local function ms(n) return string.format('%.0f', n) end
`

/**
 * KEYS[1] = the record; ARGV = scope, key, fingerprint, leaseToken, lockTimeoutMs, ttlMs.
 * Returns {'claimed', takeover '0'|'1', now, lockedUntil, expiresAt}
 *      or {'existing', fingerprint, status, response|nil, leaseToken, lockedUntil, expiresAt, now}.
 *
 *   (absent) --claim--> in_progress --complete(token)--> completed --PEXPIREAT--> (absent)
 *                        |  |                                          ^
 *                        |  +--release(token)--> (absent)              |
 *                        +--lockedUntil passes, same fingerprint --> claim = takeover
 */
export const claimScript = script(
  'claim',
  `${prologue}
local record = KEYS[1]
local fingerprint, token = ARGV[3], ARGV[4]
local found = redis.call('HMGET', record, 'fingerprint', 'status', 'response', 'leaseToken',
  'lockedUntil', 'expiresAt', 'takeover')
local status = found[2]

local function claim(takeover)
  local lockedUntil, expiresAt = ms(now + tonumber(ARGV[5])), ms(now + tonumber(ARGV[6]))
  -- The HSET below rewrites every other field; a stale response must not leak into the new one.
  if found[3] then redis.call('HDEL', record, 'response') end
  redis.call('HSET', record, 'scope', ARGV[1], 'key', ARGV[2], 'fingerprint', fingerprint,
    'status', 'in_progress', 'leaseToken', token, 'lockedUntil', lockedUntil,
    'expiresAt', expiresAt, 'takeover', takeover)
  -- The TTL is what removes records: Redis deletes the key at expiresAt, so sweep() has no work.
  redis.call('PEXPIREAT', record, expiresAt)
  return {'claimed', takeover, ms(now), lockedUntil, expiresAt}
end

-- Absent, or past expiresAt (Redis normally deleted it already): a new record.
if not status or tonumber(found[6]) <= now then return claim('0') end
if status == 'in_progress' then
  -- Our own token: this very claim already ran and the client re-sent it after losing the
  -- reply (ioredis re-sends unanswered commands on reconnect). Tokens are fresh per claim, so
  -- this is the same caller, not a competitor: answer as the first run did.
  if found[4] == token then return {'claimed', found[7] or '0', ms(now), found[5], found[6]} end
  -- The lease ended (its executor died or stalled) and the payload is the same: take it over.
  -- A new token fences the old executor off. Another payload is a reused key, not a takeover.
  if tonumber(found[5]) <= now and found[1] == fingerprint then return claim('1') end
end
-- Completed, a valid lease, or an expired lease with another payload: unchanged, returned whole
-- so that a replay is this one round trip.
return {'existing', found[1], status, found[3], found[4], found[5], found[6], ms(now)}
`,
)

/**
 * KEYS[1] = the record; ARGV = leaseToken, ttlMs, hasResponse '1'|'0', response.
 * Returns 1 when completed, 0 when the lease was lost (taken over, released or expired).
 */
export const completeScript = script(
  'complete',
  `${prologue}
local record = KEYS[1]
local found = redis.call('HMGET', record, 'status', 'leaseToken')
-- Fencing: only the current lease holder may write the outcome.
if found[1] ~= 'in_progress' or found[2] ~= ARGV[1] then return 0 end
local expiresAt = ms(now + tonumber(ARGV[2]))
if ARGV[3] == '1' then
  redis.call('HSET', record, 'status', 'completed', 'expiresAt', expiresAt, 'response', ARGV[4])
else
  redis.call('HSET', record, 'status', 'completed', 'expiresAt', expiresAt)
end
redis.call('PEXPIREAT', record, expiresAt)
return 1
`,
)

/** KEYS[1] = the record; ARGV = leaseToken. Returns 1 when deleted, 0 when the lease was lost. */
export const releaseScript = script(
  'release',
  `
local record = KEYS[1]
local found = redis.call('HMGET', record, 'status', 'leaseToken')
-- Fencing: a fenced-off executor must not delete the claim that replaced its own.
if found[1] ~= 'in_progress' or found[2] ~= ARGV[1] then return 0 end
redis.call('DEL', record)
return 1
`,
)

/**
 * KEYS[1] = the record. Returns {fingerprint, status, response|nil, leaseToken, lockedUntil,
 * expiresAt} or nil. A script rather than HMGET so both clients go through one primitive.
 */
export const getScript = script(
  'get',
  `
local found = redis.call('HMGET', KEYS[1], 'fingerprint', 'status', 'response', 'leaseToken',
  'lockedUntil', 'expiresAt')
if not found[2] then return false end
return found
`,
)
