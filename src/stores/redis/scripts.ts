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
 *   {"status":"in_progress","leaseToken":"…","expiresAt":…,"lockedUntil":…,"takeover":false,
 *    "fingerprint":"…","scope":"…","key":"…"}
 *
 * The scripts never parse JSON: they write the header by concatenation, in this field order,
 * and read it by position. The client sends the strings in it already JSON-encoded (the token
 * alone; fingerprint, scope and key as the header's ready-made tail), so the header is valid
 * JSON, and JSON escapes every newline and quote inside a string: the first '\n' ends the
 * header, and `,"` never occurs inside a string. A script's time goes on its redis.call()s and
 * on the strings it makes (each one an allocation the Lua GC pays for later), hence one string
 * per record, no cjson and no per-field splitting. Times are whole milliseconds (the client
 * rounds durations), formatted with '%d': tostring() switches to exponent notation past 14
 * digits, and '%.0f' costs more.
 *
 * Written only by these scripts, so every change is atomic; Redis deletes the key at expiresAt
 * (SET … PXAT, Redis 6.2+).
 */

// The header up to the token; the token's JSON string starts right after it (byte 38).
const inProgressHead = '{"status":"in_progress","leaseToken":'
const tokenAt = inProgressHead.length + 1

// Every time comes from the Redis server's clock (TIME), so app servers with skewed clocks agree
// on leases and expiry. TIME before a write needs effects replication, the default since Redis 5
// (and the only mode in 7), so no redis.replicate_commands() call: PXAT needs 6.2 anyway.
const serverNow = `
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
`

// Fencing: the record (`value`, a string or false) is in progress under `token`. Byte 12 is the
// status' first letter ('i'). Comparing the token's JSON string at its fixed place is exact (the
// claim's re-sent check does the same): a JSON string ends at its first unescaped quote, so a
// stored token that starts with ours is ours. Spliced in as an expression rather than a Lua
// function: a closure per call costs more.
const heldBy = (value: string, token: string) =>
  `(${value} and string.byte(${value}, 12) == 105 and ` +
  `string.sub(${value}, ${tokenAt}, ${tokenAt - 1} + #${token}) == ${token})`

/**
 * KEYS[1] = the record; ARGV = leaseToken (JSON string), the header's tail from `,"fingerprint"`
 * to its closing `}`, lockTimeoutMs, ttlMs (whole milliseconds).
 * Returns, by what happened:
 *   now (an integer)                 claimed a new record: lockedUntil/expiresAt = now + duration
 *   {'takeover', now}                claimed an expired lease of the same payload, times as above
 *   {'resent', now, record}          this very claim ran before: the stored record is its answer
 *   {'existing', now, record}        another record stands, unchanged
 *
 *   (absent) --claim--> in_progress --complete(token)--> completed --PXAT--> (absent)
 *                        |  |                                        ^
 *                        |  +--release(token)--> (absent)            |
 *                        +--lockedUntil passes, same fingerprint --> claim = takeover
 */
export const claimScript = script(
  'claim',
  `${serverNow}
local record, token, tail = KEYS[1], ARGV[1], ARGV[2]
local value = redis.call('GET', record)
local takeover = 'false'

-- Absent, or past expiresAt (Redis has normally deleted it already): a new record.
if value then
  local _, _, expiresAt, lockedUntil =
    string.find(value, ',"expiresAt":(%d+),"lockedUntil":(%d+),', ${tokenAt})
  if tonumber(expiresAt) > now then
    local inProgress = string.byte(value, 12) == 105
    -- Our own token: this very claim already ran and the client re-sent it after losing the
    -- reply (ioredis re-sends unanswered commands on reconnect). Tokens are fresh per claim, so
    -- this is the same caller, not a competitor: answer as the first run did.
    if inProgress and string.sub(value, ${tokenAt}, ${tokenAt - 1} + #token) == token then
      return {'resent', now, value}
    end
    -- The lease ended (its executor died or stalled) and the payload is the same: take it over.
    -- A new token fences the old executor off. Another payload is a reused key, not a takeover.
    -- An in-progress record has no response, so it ends with its tail; scope and key are equal
    -- for one record key, so an equal tail is an equal fingerprint.
    if not (inProgress and tonumber(lockedUntil) <= now and string.sub(value, -#tail) == tail) then
      -- Completed, a valid lease, or an expired lease with another payload: unchanged, returned
      -- whole so that a replay is this one round trip.
      return {'existing', now, value}
    end
    takeover = 'true'
  end
end

local expiresAt = string.format('%d', now + tonumber(ARGV[4]))
-- SET replaces the whole string: nothing of a record it replaces (its response) survives.
redis.call('SET', record, '${inProgressHead}' .. token .. ',"expiresAt":' .. expiresAt ..
  ',"lockedUntil":' .. string.format('%d', now + tonumber(ARGV[3])) .. ',"takeover":' ..
  takeover .. tail, 'PXAT', expiresAt)
if takeover == 'true' then return {'takeover', now} end
-- The common case, answered with a bare integer: a reply table costs the script more.
return now
`,
)

/**
 * KEYS[1] = the record; ARGV = leaseToken (JSON string), ttlMs (whole milliseconds), and, for a
 * completion with a body, the response. Returns 1 when completed, 0 when the lease was lost
 * (taken over, released or expired).
 */
export const completeScript = script(
  'complete',
  `
local record, token = KEYS[1], ARGV[1]
local value = redis.call('GET', record)
-- Fencing: only the current lease holder may write the outcome.
if not ${heldBy('value', 'token')} then return 0 end
${serverNow}
local expiresAt = string.format('%d', now + tonumber(ARGV[2]))
-- Everything after expiresAt (lockedUntil, takeover, the tail) stays: it starts at the first ','
-- after the token's ',"expiresAt":'.
local rest = string.sub(value, (string.find(value, ',', ${tokenAt + 13} + #token, true)))
-- One concatenation per branch: an intermediate string would be one more allocation.
if ARGV[3] then
  redis.call('SET', record, '{"status":"completed","leaseToken":' .. token .. ',"expiresAt":' ..
    expiresAt .. rest .. '\\n' .. ARGV[3], 'PXAT', expiresAt)
else
  redis.call('SET', record, '{"status":"completed","leaseToken":' .. token .. ',"expiresAt":' ..
    expiresAt .. rest, 'PXAT', expiresAt)
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
 * KEYS[1] = the record. Returns the stored string, or nil. A script rather than GET so both
 * clients go through one primitive.
 */
export const getScript = script('get', `return redis.call('GET', KEYS[1])`)
