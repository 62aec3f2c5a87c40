import { getTableConfig } from 'drizzle-orm/sqlite-core'
import { buildStatement, type Statement } from '../runner'
import { type SQLiteIdempotencyTable, sqliteIdempotencyKeys } from './table'

/**
 * Every statement the store sends to SQLite (libSQL, better-sqlite3, or any other driver
 * through drizzle). Times are the database's clock in epoch milliseconds: `julianday('now')`,
 * which SQLite fixes for the whole of a statement and which has millisecond precision on every
 * SQLite version (`unixepoch('subsec')` needs 3.42). Every statement returns rows (RETURNING),
 * so every driver answers the same way.
 */

const now = "cast(round((julianday('now') - 2440587.5) * 86400000) as integer)"
const inMs = (placeholder: string) => `${now} + cast(round(${placeholder}) as integer)`
/** A record as the claim's statements select it (`claimRowOfRecord` in ../rows.ts). */
const claimRowList = `fingerprint, status, response, lease_token, locked_until, expires_at, ${now}`
const quote = (identifier: string) => `"${identifier.replaceAll('"', '""')}"`

/** The DDL that creates `table`, as `ensureTable` runs it (and drizzle-kit generates it). */
export function createSQLiteTableStatements(
  table: SQLiteIdempotencyTable = sqliteIdempotencyKeys,
): string[] {
  const { name } = getTableConfig(table)
  return [
    `CREATE TABLE IF NOT EXISTS ${quote(name)} (
  "scope" text NOT NULL,
  "key" text NOT NULL,
  "fingerprint" text NOT NULL,
  "status" text NOT NULL,
  "response" text,
  "lease_token" text NOT NULL,
  "locked_until" integer NOT NULL,
  "expires_at" integer NOT NULL,
  PRIMARY KEY("scope", "key")
)`,
    `CREATE INDEX IF NOT EXISTS ${quote(`${name}_expires_at_idx`)} ON ${quote(name)} ("expires_at")`,
  ]
}

export type SQLiteStatements = ReturnType<typeof sqliteStatements>

/*
 * The claim on SQLite, in the two phases of ../claim.ts (where the record's life is drawn).
 *
 * SQLite runs one write at a time (a database-wide lock), so each statement below sees the
 * latest committed state and nothing changes under it:
 * 1. INSERT … ON CONFLICT DO UPDATE … WHERE expired RETURNING (insertOrOverwrite) inserts a
 *    fresh in-progress record or overwrites one past expires_at, and returns it: a first claim
 *    is this one statement. When a live record stands it writes nothing and returns nothing,
 *    and a SELECT (read) returns the standing record: a replay, a 409 or a 422 is two
 *    statements, neither of which writes a page.
 * 2. A standing in-progress record whose lease ran out with the same payload is taken over by
 *    an UPDATE … RETURNING pinned to the token just read (takeOver): a record completed,
 *    released or taken over in between has another token or none, matches nothing, and the
 *    claim starts again at 1. Between two statements other writers may run; the pin and the
 *    claim loop are what make that safe.
 */
export function sqliteStatements(table: SQLiteIdempotencyTable) {
  const t = quote(getTableConfig(table).name)
  const statement = (name: string, build: (p: (field: string) => string) => string): Statement =>
    buildStatement(name, false, build)
  const where = (p: (field: string) => string) => `scope = ${p('scope')} and key = ${p('key')}`
  const leaseHeld = (p: (field: string) => string) =>
    `${where(p)} and status = 'in_progress' and lease_token = ${p('leaseToken')}`
  return {
    claim: statement(
      'claim',
      (
        p,
      ) => `insert into ${t} (scope, key, fingerprint, status, response, lease_token, locked_until, expires_at)
  values (${p('scope')}, ${p('key')}, ${p('fingerprint')}, 'in_progress', null, ${p('leaseToken')},
    ${inMs(p('lockTimeoutMs'))}, ${inMs(p('ttlMs'))})
  on conflict (scope, key) do update set
    fingerprint = excluded.fingerprint, status = excluded.status, response = null,
    lease_token = excluded.lease_token, locked_until = excluded.locked_until,
    expires_at = excluded.expires_at
  where ${t}.expires_at <= ${now}
  returning ${claimRowList}`,
    ),
    read: statement('read', (p) => `select ${claimRowList} from ${t} where ${where(p)}`),
    // `expired` 1 overwrites a record past expires_at, 0 takes a lapsed lease over.
    takeOver: statement(
      'take_over',
      (
        p,
      ) => `update ${t} set fingerprint = ${p('fingerprint')}, status = 'in_progress', response = null,
    lease_token = ${p('leaseToken')}, locked_until = ${inMs(p('lockTimeoutMs'))},
    expires_at = ${inMs(p('ttlMs'))}
  where ${where(p)} and lease_token = ${p('standingToken')}
    and ((${p('expired')} = 1 and expires_at <= ${now})
      or (${p('expired')} = 0 and status = 'in_progress' and locked_until <= ${now}
        and expires_at > ${now} and fingerprint = ${p('fingerprint')}))
  returning ${claimRowList}`,
    ),
    complete: statement(
      'complete',
      (p) => `update ${t} set status = 'completed', response = ${p('response')},
  expires_at = ${inMs(p('ttlMs'))} where ${leaseHeld(p)} returning key`,
    ),
    release: statement('release', (p) => `delete from ${t} where ${leaseHeld(p)} returning key`),
    get: statement(
      'get',
      (
        p,
      ) => `select scope, key, fingerprint, status, response, lease_token, locked_until, expires_at
  from ${t} where ${where(p)}`,
    ),
    // An operator's look at one record: no response, its size in bytes (UTF-8) instead.
    inspect: statement(
      'inspect',
      (p) => `select fingerprint, status, lease_token, locked_until, expires_at,
  length(cast(response as blob)), ${now} from ${t} where ${where(p)}`,
    ),
    // An operator's release: the record `inspect` read, by its token and status, or nothing.
    deletePinned: statement(
      'delete_pinned',
      (p) => `delete from ${t} where ${where(p)} and lease_token = ${p('leaseToken')}
  and status = ${p('status')} returning key`,
    ),
    sweep: statement(
      'sweep',
      (p) => `delete from ${t} where rowid in (
    select rowid from ${t} where expires_at <= ${now} order by expires_at limit ${p('batchSize')}
  ) returning 1`,
    ),
  }
}
