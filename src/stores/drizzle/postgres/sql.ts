import { createHash } from 'node:crypto'
import { getTableConfig } from 'drizzle-orm/pg-core'
import { claimRowOf } from '../rows'
import { buildStatement, type Row } from '../runner'
import { type IdempotencyTable, idempotencyKeys } from '../table'

/**
 * Every statement the store sends to PostgreSQL, and the decoding of its rows. Times are the
 * server's: `statement_timestamp()`, the time the statement began (`now()` is the time its
 * transaction began, which in transactional mode can be a lock wait or a handler ago). They
 * come back as epoch milliseconds computed by the server, as float8, which every driver hands
 * over as a JavaScript number.
 */

const now = 'statement_timestamp()'
const epochMs = (value: string) => `floor(extract(epoch from ${value}) * 1000)::float8`
const inMs = (placeholder: string) => `${now} + ${placeholder}::float8 * interval '1 millisecond'`
/** A completed record that still counts: what a replay reads (`prefix` is an alias and a dot). */
const completedAndLive = (prefix = '') =>
  `(${prefix}status = 'completed' and ${prefix}expires_at > ${now})`

/** The columns of a claim row, as PGlite's functions declare them (see ./pglite.ts). */
const claimColumns = `state integer, fingerprint text, status text, response text,
      lease_token text, locked_until float8, expires_at float8, now float8`
/** The select list of a claim row from the claim's `r`. */
const claimRowList = `r.state, r.fingerprint, r.status, r.response, r.lease_token,
      ${epochMs('r.locked_until')}, ${epochMs('r.expires_at')}, ${epochMs(now)}`

/** `table`'s name, schema-qualified and quoted, and a short tag that tells it from others. */
export function tableIdentity(table: IdempotencyTable) {
  const { name, schema } = getTableConfig(table)
  const quote = (identifier: string) => `"${identifier.replaceAll('"', '""')}"`
  return {
    name,
    schema,
    quote,
    qualified: schema === undefined ? quote(name) : `${quote(schema)}.${quote(name)}`,
    // node-postgres keeps named statements per connection and refuses one name for two texts,
    // so each table gets its own names.
    tag: createHash('sha256')
      .update(`v1:${schema ?? ''}.${name}`)
      .digest('hex')
      .slice(0, 12),
  }
}

/** The DDL that creates `table` (one statement per entry), as `ensureTable` runs it. */
export function createTableStatements(table: IdempotencyTable = idempotencyKeys): string[] {
  const { name, schema, quote, qualified } = tableIdentity(table)
  return [
    ...(schema === undefined ? [] : [`CREATE SCHEMA IF NOT EXISTS ${quote(schema)}`]),
    `CREATE TABLE IF NOT EXISTS ${qualified} (
  "scope" text NOT NULL,
  "key" text NOT NULL,
  "fingerprint" text NOT NULL,
  "status" text NOT NULL,
  "response" text,
  "lease_token" text NOT NULL,
  "locked_until" timestamp with time zone NOT NULL,
  "expires_at" timestamp with time zone NOT NULL,
  CONSTRAINT ${quote(`${name}_pkey`)} PRIMARY KEY ("scope", "key")
)`,
    `CREATE INDEX IF NOT EXISTS ${quote(`${name}_expires_at_idx`)} ON ${qualified} ("expires_at")`,
  ]
}

/** SQLSTATEs of two processes creating the same table, index or schema at once. */
export const alreadyCreated = ['23505', '42P07', '42P06', '42710']

/** The statements of the store over one table. */
export type PostgresStatements = ReturnType<typeof postgresStatements>

export function postgresStatements(table: IdempotencyTable) {
  const { qualified: t, tag } = tableIdentity(table)
  const named = (kind: string) => `idempotent_mutations_${kind}_${tag}`
  const statement = (kind: string, build: (p: (field: string) => string) => string) =>
    buildStatement(named(kind), true, build)
  const claim = (kind: string, build: (p: (field: string) => string) => string, extra = '') =>
    buildStatement(named(kind), true, build, claimColumns + extra)

  return {
    insertOrRead: claim('insert_or_read', (p) => insertOrRead(t, p)),
    underLock: claim('claim', (p) => lockedClaim(t, p)),
    boundedClaim: claim(
      'tx_claim',
      (p) => boundedInsertOrRead(t, p),
      ', found integer, previous text, restored text',
    ),
    setLockTimeout: statement('tx_lock_timeout', (p) => boundedLockTimeout(p)),
    complete: buildStatement(
      named('complete'),
      true,
      (p) =>
        `update ${t} set status = 'completed', response = ${p('response')}, expires_at = ${inMs(p('ttlMs'))}
  where ${leaseHeld(p)} returning key`,
      'key text',
    ),
    release: statement('release', (p) => `delete from ${t} where ${leaseHeld(p)} returning key`),
    get: statement(
      'get',
      (p) => `select scope, key, fingerprint, status, response, lease_token,
  ${epochMs('locked_until')}, ${epochMs('expires_at')}
  from ${t} where scope = ${p('scope')} and key = ${p('key')}`,
    ),
    // An operator's look at one record: no response, its size instead (see `inspectionOf`).
    inspect: statement(
      'inspect',
      (p) => `select fingerprint, status, lease_token, ${epochMs('locked_until')},
  ${epochMs('expires_at')}, octet_length(response), ${epochMs(now)}
  from ${t} where scope = ${p('scope')} and key = ${p('key')}`,
    ),
    // An operator's release: the record `inspect` read, by its token and status, or nothing.
    deletePinned: statement(
      'delete_pinned',
      (p) => `delete from ${t} where scope = ${p('scope')} and key = ${p('key')}
  and lease_token = ${p('leaseToken')} and status = ${p('status')} returning key`,
    ),
    // Locks the batch with SKIP LOCKED so a sweep never waits on (or blocks) a claim of the same
    // row, and re-checks expiry in the DELETE itself.
    sweep: statement(
      'sweep',
      (p) => `with "swept" as (
    delete from ${t}
    where (scope, key) in (
      select scope, key from ${t}
      where expires_at <= ${now}
      limit ${p('batchSize')}
      for update skip locked
    ) and expires_at <= ${now}
    returning 1) select count(*)::int from swept`,
    ),
  }
}

/** The record is in progress under the caller's lease: what completion and release require. */
const leaseHeld = (p: (field: string) => string) =>
  `scope = ${p('scope')} and key = ${p('key')} and status = 'in_progress' and lease_token = ${p('leaseToken')}`

/**
 * The `inserted` CTE: the insert of a fresh in-progress record, which inserts nothing when the
 * key exists. With `from`, its one row is selected from that (a CTE the insert must then run
 * after) instead of being a VALUES list.
 */
function insertedRecord(t: string, p: (field: string) => string, from?: string): string {
  const row = `${p('scope')}, ${p('key')}, ${p('fingerprint')}, 'in_progress', null,
      ${p('leaseToken')}, ${inMs(p('lockTimeoutMs'))},
      ${inMs(p('ttlMs'))}`
  return `"inserted" as (
    insert into ${t}
      (scope, key, fingerprint, status, response, lease_token, locked_until, expires_at)
    ${from === undefined ? `values (${row})` : `select ${row} from ${from}`}
    on conflict (scope, key) do nothing
    returning locked_until, expires_at)`
}

/** The claim rows from `inserted`: the inserted record (state 1), else the standing one (0). */
const insertedOrStanding = (t: string, p: (field: string) => string) => `
      select 1 as state, null::text as fingerprint, null::text as status, null::text as response,
        null::text as lease_token, locked_until, expires_at
      from inserted
      union all
      select 0, fingerprint, status, response, lease_token, locked_until, expires_at
      from ${t}
      where scope = ${p('scope')} and key = ${p('key')} and not exists (select 1 from inserted)`

/**
 * The first phase of a claim, and usually the whole of it: insert a fresh in-progress record,
 * or read the record that stands. ON CONFLICT DO NOTHING takes no row lock and writes nothing
 * when the key exists, so a replay, a 409 and a 422 cost one read-only statement; it still
 * waits for a concurrent uncommitted insert of the key (it must know whether the conflict is
 * real), which transactional mode's wait is built on. Its row: state 1 (claimed) or 0 with the
 * standing record as this statement's snapshot holds it (no row when a concurrent claim
 * inserted it after the snapshot; the caller runs the claim again).
 *
 * A standing record changed by another claim after the snapshot (completed, released) is
 * answered as the snapshot holds it: a duplicate that raced the completion gets 409 and its
 * retry replays.
 */
function insertOrRead(t: string, p: (field: string) => string): string {
  return `with ${insertedRecord(t, p)} select ${claimRowList} from (${insertedOrStanding(t, p)}) as r`
}

/**
 * The claim under the row lock: the second phase of a claim, for a record the first read as
 * expired, or as in progress under a lease that ran out with the same payload
 * (`claimsUnderLock` in ../claim.ts, which must agree with this statement's WHERE). It decides
 * overwrite and takeover atomically (the record's life is drawn above `claimInPhases` in
 * ../claim.ts).
 *
 * INSERT … ON CONFLICT DO UPDATE … WHERE decides atomically under the row lock:
 * - no row: the INSERT writes a fresh in_progress record (claimed).
 * - expires_at passed: the record no longer counts, so it is overwritten (claimed, not a
 *   takeover: `prior` below reads it as expired).
 * - in_progress, lease over, same fingerprint: its executor died; take it over with a new
 *   token, which fences the old executor's late complete/release off.
 * - anything else (completed, valid lease, expired lease with another payload): the WHERE
 *   is false, nothing changes, `claimed` is empty, and the outer SELECT returns the row so
 *   the claim answers (replay, 409 or 422) without another statement.
 * `prior` reads the statement's snapshot, which still holds the row as it was before this
 * statement, so it tells a takeover from a claim of an absent or expired key.
 *
 * A completed record takes no lock here either (the first phase read it as something else,
 * and another claim completed it since). A record that is completed and not expired in this
 * statement's snapshot cannot change under it (claim, complete, release and sweep all leave
 * such a record alone), so the INSERT is skipped (`done`) and the snapshot's row is returned as
 * it is. Without this, ON CONFLICT DO UPDATE (and FOR SHARE) would lock the row even when
 * nothing is updated: a row lock is a WAL write, which would make a claim that meets a record
 * completed between the two phases wait for a durable commit.
 *
 * READ COMMITTED corners, when another claim commits while this statement runs:
 * - it changed the row after this statement's snapshot (took it over, completed it): a plain
 *   SELECT would return the snapshot's stale version. `for share` makes Postgres fetch the
 *   row's latest version instead (the ON CONFLICT branch already holds its lock, so this
 *   never waits), so every refused claimer sees the winner's record. A row that was not yet
 *   completed in the snapshot but is now fails the `for share` branch's re-check, and the
 *   snapshot branch does not see it completed: no row, and the claim starts again.
 * - it inserted the row after the snapshot: ON CONFLICT sees it, the SELECT cannot, and the
 *   statement returns no row; the claim starts again.
 *
 * `state`: 0 the standing record refused the claim, 1 claimed, 2 claimed by takeover. The three
 * branches exclude each other, so at most one row comes back; `limit 1` stops the scan there.
 */
function lockedClaim(t: string, p: (field: string) => string): string {
  const scope = p('scope')
  const key = p('key')
  return `with "done" as (
    select fingerprint, status, response, lease_token, locked_until, expires_at
    from ${t}
    where scope = ${scope} and key = ${key} and ${completedAndLive()}), "claimed" as (
    insert into ${t} as t
      (scope, key, fingerprint, status, response, lease_token, locked_until, expires_at)
    select ${scope}, ${key}, ${p('fingerprint')}, 'in_progress', null, ${p('leaseToken')},
      ${inMs(p('lockTimeoutMs'))}, ${inMs(p('ttlMs'))}
    where not exists (select 1 from done)
    on conflict (scope, key) do update set
      fingerprint = excluded.fingerprint, status = excluded.status, response = null,
      lease_token = excluded.lease_token, locked_until = excluded.locked_until,
      expires_at = excluded.expires_at
    where t.expires_at <= ${now}
      or (t.status = 'in_progress' and t.locked_until <= ${now} and t.fingerprint = excluded.fingerprint)
    returning t.locked_until, t.expires_at,
      exists (select 1 from ${t} as prior
        where prior.scope = ${scope} and prior.key = ${key} and prior.expires_at > ${now}
      ) as takeover) select ${claimRowList} from (
      select case when takeover then 2 else 1 end as state, null::text as fingerprint,
        null::text as status, null::text as response, null::text as lease_token,
        locked_until, expires_at
      from claimed
      union all
      select 0, fingerprint, status, response, lease_token, locked_until, expires_at
      from done
      where not exists (select 1 from claimed)
      union all
      select 0, fingerprint, status, response, lease_token, locked_until, expires_at
      from (
        select * from ${t}
        where scope = ${scope} and key = ${key} and not exists (select 1 from claimed)
          and not ${completedAndLive()}
        for share
      ) as standing
      limit 1
    ) as r`
}

/**
 * Transactional mode's first claim statement (see ./transactional.ts): it bounds its own wait
 * on a concurrent uncommitted claim (`lock_timeout` set to `lockWait` before the insert runs,
 * which selects from the `swap` CTE) and, when it claims, restores the caller's `lock_timeout`
 * in its select list, which is evaluated after the insert. One round trip instead of three. It
 * always returns one row: `found` 0 when the claim read nothing (then `lock_timeout` is still
 * the bound), and `previous`, the caller's setting.
 */
function boundedInsertOrRead(t: string, p: (field: string) => string): string {
  return `with "swap" as (
    select p.previous, set_config('lock_timeout', ${p('lockWait')}, true) as bound
    from (select current_setting('lock_timeout') as previous offset 0) as p), ${insertedRecord(t, p, 'swap')}
    select ${claimRowList}, (r.state is not null)::int, swap.previous,
      case when r.state = 1 then set_config('lock_timeout', swap.previous, true) end
    from swap left join lateral (${insertedOrStanding(t, p)}) as r on true`
}

const boundedLockTimeout = (p: (field: string) => string) =>
  `select set_config('lock_timeout', ${p('lockWait')}, true)`

/** The bounded claim's row: a claim row, whether it read one, and the caller's `lock_timeout`. */
export function boundedClaimRowOf(row: Row | undefined) {
  if (row === undefined) {
    throw new Error('idempotent-mutations: the claim statement returned no row')
  }
  return { claim: claimRowOf(row)!, found: Number(row[8]) > 0, previous: row[9] as string }
}
