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

/*
 * A record is one Redis string: a header line of JSON, then, for a completed record with a
 * body, '\n' and the response exactly as given.
 *
 *   {"status":"in_progress","leaseToken":"…","leaseEndsBeforeExpiryMs":…,"takeover":false,
 *    "fingerprint":"…","scope":"…","key":"…"}
 *
 * The header holds no clock reading. `expiresAt` is the key's own Redis expiry (PEXPIRETIME),
 * and `lockedUntil` is `expiresAt - leaseEndsBeforeExpiryMs`: the claim writes `SET … PX ttl`
 * with `ttl - lockTimeout` in the header, and the completion `SET … PX ttl` with `ttl` (its lease
 * ended when it completed). So no script reads TIME or formats a number on the first
 * execution's path (each number in a header is a string the client sent), and every time is
 * still the Redis server's, exact to the millisecond. PEXPIRETIME and `SET … NX GET` need
 * Redis 7.0.
 *
 * The scripts never parse JSON: they read the header by position and write it by
 * concatenation, in this field order. The client builds a claim's header whole, with its
 * strings JSON-encoded, so the header is valid JSON, and JSON escapes every newline and quote
 * inside a string: the first '\n' ends the header, and `,"` never occurs inside a string. A
 * script's time goes on its redis.call()s and on the strings it makes (each one an allocation
 * the Lua GC pays for later), hence one string per record, no cjson, no per-field splitting,
 * and no concatenation on a claim of a free key.
 *
 * Written only by these scripts, so every change is atomic; Redis deletes the key when it
 * expires.
 */

// The header up to the token; the token's JSON string starts right after it (byte 38).
const inProgressHead = '{"status":"in_progress","leaseToken":'
const tokenAt = inProgressHead.length + 1
// Follows the token in both statuses; its number ends at the next ','.
const leaseField = ',"leaseEndsBeforeExpiryMs":'
// Follows the lease field's number; the tail (fingerprint, scope, key) follows it.
const takeoverFalse = ',"takeover":false'
const takeoverTrue = ',"takeover":true'

/**
 * The header of the record a claim writes, as the claim script expects it (see above): `token`
 * and `tail` (from `,"fingerprint"` to the closing `}`) already JSON-encoded.
 */
export function inProgressHeader(token: string, leaseEndsBeforeExpiryMs: number, tail: string) {
  return `${inProgressHead}${token}${leaseField}${leaseEndsBeforeExpiryMs}${takeoverFalse}${tail}`
}

/**
 * Refuses to run on Redis before 7.0 (no PEXPIRETIME, no `SET … NX GET`) with an error that
 * says so, instead of a syntax error from the middle of a script. `redis.REDIS_VERSION_NUM`
 * itself came with 7.0. Exported for its test, which hides the field to see the refusal.
 */
export const versionGuard = `if not redis.REDIS_VERSION_NUM then
  return redis.error_reply('idempotent-mutations: the Redis store needs Redis 7.0 or newer')
end`

// Fencing: the record (`value`, a string or false) is in progress under `token`. Byte 12 is the
// status' first letter ('i'). Comparing the token's JSON string at its fixed place is exact (the
// claim's re-sent check does the same): a JSON string ends at its first unescaped quote, so a
// stored token that starts with ours is ours. Spliced in as an expression rather than a Lua
// function: a closure per call costs more.
const heldBy = (value: string, token: string) =>
  `(${value} and string.byte(${value}, 12) == 105 and ` +
  `string.sub(${value}, ${tokenAt}, ${tokenAt - 1} + #${token}) == ${token})`

/**
 * KEYS[1] = the record; ARGV = leaseToken (JSON string), the in-progress record to write (its
 * header, built by the client with `"takeover":false`), ttlMs (whole milliseconds, at least 1).
 * Returns, by what happened:
 *   expiresAt (an integer)                 claimed: the record written expires then
 *   {'takeover', expiresAt}                claimed an expired lease of the same payload
 *   {'resent', expiresAt, record}          this very claim ran before: the stored record answers
 *   {'existing', now, expiresAt, record}   another record stands, unchanged
 *
 *   (absent) --claim--> in_progress --complete(token)--> completed --PX--> (absent)
 *                        |  |                                      ^
 *                        |  +--release(token)--> (absent)          |
 *                        +--lockedUntil passes, same fingerprint --> claim = takeover
 */
export const claimScript = script(
  'claim',
  `${versionGuard}
local record, token, claim = KEYS[1], ARGV[1], ARGV[2]
-- The common case is one command: no record (Redis has deleted an expired one, or deletes it
-- now), so SET writes ours and answers nil. Otherwise it writes nothing and answers the record.
local value = redis.call('SET', record, claim, 'NX', 'GET', 'PX', ARGV[3])
if not value then return redis.call('PEXPIRETIME', record) end

local expiresAt = redis.call('PEXPIRETIME', record)
local inProgress = string.byte(value, 12) == 105
-- Our own token: this very claim already ran and the client re-sent it after losing the reply
-- (ioredis re-sends unanswered commands on reconnect). Tokens are fresh per claim, so this is
-- the same caller, not a competitor: answer as the first run did.
if inProgress and string.sub(value, ${tokenAt}, ${tokenAt - 1} + #token) == token then
  return {'resent', expiresAt, value}
end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
if inProgress then
  -- The stored token is another claim's, of its own length: find the field after it (',"'
  -- never occurs inside a JSON string, so the first match is the field).
  local _, from = string.find(value, '${leaseField}', ${tokenAt}, true)
  local lockedUntil =
    expiresAt - tonumber(string.sub(value, from + 1, string.find(value, ',', from, true) - 1))
  -- The lease ended (its executor died or stalled) and the payload is the same: take it over.
  -- A new token fences the old executor off. Another payload is a reused key, not a takeover.
  -- A lease still held (every 409 of a storm) goes no further than this test.
  if lockedUntil <= now then
    -- The claim's tail: fingerprint, scope and key, after its takeover flag. An in-progress
    -- record has no response, so it ends with its tail; scope and key are equal for one record
    -- key, so an equal tail is an equal fingerprint.
    local flagAt, flagEnd = string.find(claim, '${takeoverFalse}', ${tokenAt} + #token, true)
    local tail = string.sub(claim, flagEnd + 1)
    if string.sub(value, -#tail) == tail then
      -- SET replaces the whole string: nothing of the record it replaces survives.
      redis.call('SET', record, string.sub(claim, 1, flagAt - 1) .. '${takeoverTrue}' .. tail,
        'PX', ARGV[3])
      return {'takeover', redis.call('PEXPIRETIME', record)}
    end
  end
end
-- Completed, a valid lease, or an expired lease with another payload: unchanged, returned
-- whole so that a replay is this one round trip.
return {'existing', now, expiresAt, value}
`,
)

/**
 * KEYS[1] = the record; ARGV = leaseToken (JSON string), ttlMs (whole milliseconds, at least 1),
 * and, for a completion with a body, the response. Returns 1 when completed, 0 when the lease
 * was lost (taken over, released or expired).
 */
export const completeScript = script(
  'complete',
  `
local record, token = KEYS[1], ARGV[1]
local value = redis.call('GET', record)
-- Fencing: only the current lease holder may write the outcome.
if not ${heldBy('value', 'token')} then return 0 end
-- Everything after the lease field (takeover, fingerprint, scope, key) stays: it starts at the
-- first ',' after the field's number. The lease field becomes ttlMs: the lease ended now,
-- ttlMs before the new expiry.
local rest = string.sub(value, (string.find(value, ',', ${tokenAt + leaseField.length} + #token, true)))
-- One concatenation per branch: an intermediate string would be one more allocation.
if ARGV[3] then
  redis.call('SET', record, '{"status":"completed","leaseToken":' .. token .. '${leaseField}' ..
    ARGV[2] .. rest .. '\\n' .. ARGV[3], 'PX', ARGV[2])
else
  redis.call('SET', record, '{"status":"completed","leaseToken":' .. token .. '${leaseField}' ..
    ARGV[2] .. rest, 'PX', ARGV[2])
end
return 1
`,
)

/**
 * KEYS[1] = the record; ARGV = leaseToken (JSON string). Returns 1 when deleted, 0 when the
 * lease was lost.
 */
export const releaseScript = script(
  'release',
  `
local value = redis.call('GET', KEYS[1])
-- Fencing: a fenced-off executor must not delete the claim that replaced its own.
if not ${heldBy('value', 'ARGV[1]')} then return 0 end
redis.call('DEL', KEYS[1])
return 1
`,
)

/**
 * KEYS[1] = the record. Returns {expiresAt, record}, or nil. A script rather than GET and
 * PEXPIRETIME so both clients go through one primitive and the two readings are of one record.
 */
export const getScript = script(
  'get',
  `${versionGuard}
local value = redis.call('GET', KEYS[1])
if not value then return nil end
return {redis.call('PEXPIRETIME', KEYS[1]), value}
`,
)

/**
 * KEYS[1] = the record. Returns {expiresAt, header, responseBytes, now}, or nil: an operator's
 * look at the record without its response (`responseBytes` is -1 for none), with the server's
 * clock to compare its times with.
 */
export const inspectScript = script(
  'inspect',
  `${versionGuard}
local value = redis.call('GET', KEYS[1])
if not value then return nil end
local header, responseBytes = value, -1
local newline = string.find(value, '\\n', 1, true)
if newline then
  header = string.sub(value, 1, newline - 1)
  responseBytes = #value - newline
end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
return {redis.call('PEXPIRETIME', KEYS[1]), header, responseBytes, now}
`,
)

/**
 * KEYS[1] = the record; ARGV = the start of the record to delete: its header up to and with its
 * lease token (`{"status":"…","leaseToken":"…"`). An operator's release of the record it
 * inspected, pinned to its status and token (a token's JSON string ends at its closing quote, so
 * a prefix match is exact). Returns 1 when deleted, 0 when the record changed or is gone.
 */
export const deletePinnedScript = script(
  'delete_pinned',
  `
local value = redis.call('GET', KEYS[1])
if not value or string.sub(value, 1, #ARGV[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
`,
)

/** The start of a stored record's header up to its lease token, for {@link deletePinnedScript}. */
export function headerThroughToken(status: string, token: string): string {
  return `{"status":"${status}","leaseToken":${token}`
}
