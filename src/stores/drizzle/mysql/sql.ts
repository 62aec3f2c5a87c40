import { getTableConfig } from 'drizzle-orm/mysql-core'
import { buildStatement, type Statement } from '../runner'
import { type MySqlIdempotencyTable, mysqlIdempotencyKeys, mysqlScopeLength } from './table'

/**
 * Every statement the store sends to MySQL or MariaDB. Times are the server's:
 * `UTC_TIMESTAMP(3)`, which MySQL evaluates once per statement, stored as DATETIME(3) in UTC
 * and read back as epoch milliseconds computed by the server, whatever the session's time
 * zone. Rows come back as the shared decoders of ../rows.ts read them; a statement without a
 * result set answers one row holding the number of rows it matched (see ./driver.ts).
 */

const now = 'utc_timestamp(3)'
const epochMs = (value: string) => `timestampdiff(microsecond, '1970-01-01', ${value}) div 1000`
const inMs = (placeholder: string) => `${now} + interval round(${placeholder} * 1000) microsecond`
/** A record as the claim's statements select it (`claimRowOfRecord` in ../rows.ts). */
const claimRowList = `fingerprint, status, response, lease_token, ${epochMs('locked_until')},
  ${epochMs('expires_at')}, ${epochMs(now)}`
const quote = (identifier: string) => `\`${identifier.replaceAll('`', '``')}\``

/** The DDL that creates `table`, as `ensureTable` runs it (and drizzle-kit generates it). */
export function createMySqlTableStatements(
  table: MySqlIdempotencyTable = mysqlIdempotencyKeys,
): string[] {
  const { name } = getTableConfig(table)
  const text = (length?: number) =>
    `${length === undefined ? 'longtext' : `varchar(${length})`} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`
  return [
    `CREATE TABLE IF NOT EXISTS ${quote(name)} (
  \`scope\` ${text(mysqlScopeLength)} NOT NULL,
  \`key\` ${text(255)} NOT NULL,
  \`fingerprint\` ${text(255)} NOT NULL,
  \`status\` ${text(16)} NOT NULL,
  \`response\` ${text()},
  \`lease_token\` ${text(255)} NOT NULL,
  \`locked_until\` datetime(3) NOT NULL,
  \`expires_at\` datetime(3) NOT NULL,
  CONSTRAINT ${quote(`${name}_pkey`)} PRIMARY KEY(\`scope\`,\`key\`)
)`,
    // MySQL has no CREATE INDEX IF NOT EXISTS: ensureTable takes "duplicate key name" as done.
    `CREATE INDEX ${quote(`${name}_expires_at_idx`)} ON ${quote(name)} (\`expires_at\`)`,
  ]
}

/** Error codes of a table or index that another process created first. */
export const mysqlAlreadyCreated = ['ER_DUP_KEYNAME', 'ER_TABLE_EXISTS_ERROR']

export type MySqlStatements = ReturnType<typeof mysqlStatements>

/** The statements over one table. `returning`: the server is MariaDB (INSERT … RETURNING). */
export function mysqlStatements(table: MySqlIdempotencyTable, returning: boolean) {
  const t = quote(getTableConfig(table).name)
  const statement = (name: string, build: (p: (field: string) => string) => string): Statement =>
    buildStatement(name, false, build)
  const where = (p: (field: string) => string) =>
    `\`scope\` = ${p('scope')} and \`key\` = ${p('key')}`
  const leaseHeld = (p: (field: string) => string) =>
    `${where(p)} and status = 'in_progress' and lease_token = ${p('leaseToken')}`
  return {
    returning,
    claim: statement('claim', (p) => insertOrOverwrite(t, p, returning)),
    read: statement('read', (p) => `select ${claimRowList} from ${t} where ${where(p)}`),
    takeOver: statement('take_over', (p) => takeOver(t, p)),
    complete: statement(
      'complete',
      (p) => `update ${t} set status = 'completed', response = ${p('response')},
  expires_at = ${inMs(p('ttlMs'))} where ${leaseHeld(p)}`,
    ),
    release: statement('release', (p) => `delete from ${t} where ${leaseHeld(p)}`),
    get: statement(
      'get',
      (p) => `select \`scope\`, \`key\`, fingerprint, status, response, lease_token,
  ${epochMs('locked_until')}, ${epochMs('expires_at')} from ${t} where ${where(p)}`,
    ),
    // An operator's look at one record: no response, its size in bytes instead.
    inspect: statement(
      'inspect',
      (p) => `select fingerprint, status, lease_token, ${epochMs('locked_until')},
  ${epochMs('expires_at')}, length(response), ${epochMs(now)} from ${t} where ${where(p)}`,
    ),
    // An operator's release: the record `inspect` read, by its token and status, or nothing.
    deletePinned: statement(
      'delete_pinned',
      (p) =>
        `delete from ${t} where ${where(p)} and lease_token = ${p('leaseToken')} and status = ${p('status')}`,
    ),
    // One batch, oldest first through the expires_at index; rows a claim holds are waited for
    // (MySQL 8 and MariaDB before 10.6 have no SKIP LOCKED for DELETE), for a moment.
    sweep: statement(
      'sweep',
      (p) =>
        `delete from ${t} where expires_at <= ${now} order by expires_at limit ${p('batchSize')}`,
    ),
    version: statement('version', () => 'select version()'),
  }
}

/*
 * The claim on MySQL and MariaDB, in the two phases of ../claim.ts (where the record's life
 * is drawn).
 *
 * 1. INSERT … ON DUPLICATE KEY UPDATE (insertOrOverwrite) inserts a fresh in-progress record,
 *    or overwrites a record past expires_at, or leaves the standing one as it is; MariaDB
 *    returns the row as it stands after it (RETURNING), MySQL 8 reads it with a SELECT. The
 *    caller's token in that row means the claim won. A replay, a 409 and a 422 end here.
 * 2. A standing in-progress record whose lease ran out with the same payload is taken over by
 *    an UPDATE pinned to the token just read (takeOver): a record completed, released or
 *    taken over since then no longer has that token, matches nothing, and the claim starts
 *    again at 1. Then the row is read for its times.
 *
 * Round trips: MariaDB one for a first claim, a replay, a 409 or a 422, three for a takeover;
 * MySQL 8 two and four.
 *
 * Isolation (InnoDB's default is REPEATABLE READ; each statement here commits on its own):
 *
 *   claimer A                                  claimer B
 *   INSERT … ODKU: inserts, X-locks the key
 *                                              INSERT … ODKU: waits on A's lock
 *   COMMIT (autocommit)
 *                                              sees A's committed row (a locking read takes
 *                                              the latest version, not a snapshot), and its
 *                                              IF()s keep it: B gets A's record, unchanged
 *
 * - ON DUPLICATE KEY UPDATE reads the row under an exclusive lock, so the expiry test in its
 *   IF()s sees the latest committed version: two claimers of an expired record cannot both
 *   overwrite it, the second one finds the first one's fresh record.
 * - MySQL 8's SELECT after the insert is a consistent read in a new snapshot, taken after the
 *   insert committed: it sees that insert or anything committed after it (a completion, a
 *   release: then no row, and the claim starts again).
 * - The takeover's UPDATE is a locking read as well: two takers of one lapsed lease both match
 *   the token they read, but the second one waits for the first, then re-reads the row (a
 *   locking read's WHERE is checked against the latest version), finds a new token and
 *   matches nothing.
 * - Every IF() tests `expires_at` only, and `expires_at` is assigned last: the same test
 *   whether the server assigns left to right (MySQL) or all at once (MariaDB's
 *   SIMULTANEOUS_ASSIGNMENT mode).
 */
function insertOrOverwrite(t: string, p: (field: string) => string, returning: boolean): string {
  const expired = `expires_at <= ${now}`
  return `insert into ${t} (\`scope\`, \`key\`, fingerprint, status, response, lease_token, locked_until, expires_at)
  values (${p('scope')}, ${p('key')}, ${p('fingerprint')}, 'in_progress', null, ${p('leaseToken')},
    ${inMs(p('lockTimeoutMs'))}, ${inMs(p('ttlMs'))})
  on duplicate key update
    fingerprint = if(${expired}, ${p('fingerprint')}, fingerprint),
    status = if(${expired}, 'in_progress', status),
    response = if(${expired}, null, response),
    lease_token = if(${expired}, ${p('leaseToken')}, lease_token),
    locked_until = if(${expired}, ${inMs(p('lockTimeoutMs'))}, locked_until),
    expires_at = if(${expired}, ${inMs(p('ttlMs'))}, expires_at)${returning ? `\n  returning ${claimRowList}` : ''}`
}

/**
 * The claim of a standing record `claimsUnderLock` allowed, pinned to its token
 * (`standingToken`): `expired` 1 overwrites it as past expires_at, 0 takes a lapsed lease over
 * (the record must still be live, in progress, with the same payload). Matches one row or none.
 */
function takeOver(t: string, p: (field: string) => string): string {
  return `update ${t} set fingerprint = ${p('fingerprint')}, status = 'in_progress', response = null,
    lease_token = ${p('leaseToken')}, locked_until = ${inMs(p('lockTimeoutMs'))},
    expires_at = ${inMs(p('ttlMs'))}
  where \`scope\` = ${p('scope')} and \`key\` = ${p('key')} and lease_token = ${p('standingToken')}
    and ((${p('expired')} = 1 and expires_at <= ${now})
      or (${p('expired')} = 0 and status = 'in_progress' and locked_until <= ${now}
        and expires_at > ${now} and fingerprint = ${p('fingerprint')}))`
}
