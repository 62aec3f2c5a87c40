import postgres from 'postgres'
import { ownPostgresMissing } from '../reliability/fixtures/own-postgres'
import { ownRedisMissing } from '../reliability/fixtures/own-redis'
import { databaseUrl, mysqlUrl, redisUrl, testSchemaSuffix } from './env'

/**
 * Prints, once per run, which service-backed suites run and which are skipped, and drops the
 * test schemas of runs that were killed before they cleaned up.
 */
export default async function setup(): Promise<void> {
  const ran: string[] = ['memory', 'PGlite']
  const skipped: string[] = []
  ;(databaseUrl ? ran : skipped).push(
    databaseUrl ? 'PostgreSQL' : 'PostgreSQL (DATABASE_URL not set)',
  )
  ;(redisUrl ? ran : skipped).push(redisUrl ? 'Redis' : 'Redis (REDIS_URL not set)')
  ;(mysqlUrl ? ran : skipped).push(mysqlUrl ? 'MySQL' : 'MySQL (MYSQL_URL not set)')
  // The fault suite runs servers of its own, from the installed binaries.
  if (databaseUrl && ownPostgresMissing) skipped.push(`the fault suite (${ownPostgresMissing})`)
  else if (databaseUrl && ownRedisMissing) {
    skipped.push(`the fault suite's Redis scenarios (${ownRedisMissing})`)
  }
  const line = skipped.length
    ? `[idempotent-mutations tests] stores: ${ran.join(', ')}; skipped suites: ${skipped.join(', ')}`
    : `[idempotent-mutations tests] stores: ${ran.join(', ')}; no suite skipped`
  console.log(line)
  if (databaseUrl) await dropOrphanedSchemas(databaseUrl)
  if (mysqlUrl) await dropOrphanedMySqlTables(mysqlUrl)
}

/** Drops `im_…_p<pid>_<n>` tables (see test/stores/dialects.ts) whose process no longer runs. */
async function dropOrphanedMySqlTables(url: string): Promise<void> {
  const mysql = await import('mysql2/promise')
  const connection = await mysql.createConnection(url)
  try {
    const [rows] = await connection.query<import('mysql2').RowDataPacket[]>(
      "select table_name as name from information_schema.tables where table_schema = database() and table_name like 'im\\_%'",
    )
    for (const { name } of rows) {
      const pid = /_p([0-9]+)_[0-9]+$/.exec(String(name))?.[1]
      if (pid === undefined || isRunning(Number(pid))) continue
      await connection.query(`drop table if exists \`${name}\``)
    }
  } finally {
    await connection.end()
  }
}

/** Drops `im_…_p<pid>` schemas (see testSchema) whose process no longer runs. */
async function dropOrphanedSchemas(url: string): Promise<void> {
  const sql = postgres(url, { max: 1, onnotice: () => {} })
  try {
    const rows = await sql<{ name: string }[]>`
      select nspname as name from pg_namespace where starts_with(nspname, 'im_')`
    for (const { name } of rows) {
      const pid = testSchemaSuffix.exec(name)?.[1]
      if (pid === undefined || isRunning(Number(pid))) continue
      await sql.unsafe(`drop schema if exists "${name}" cascade`)
    }
  } finally {
    await sql.end()
  }
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    // EPERM: it runs under another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}
