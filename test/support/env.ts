/** Which real services this run talks to; suites that need a missing one are skipped. */
export const databaseUrl = process.env.DATABASE_URL || undefined
export const redisUrl = process.env.REDIS_URL || undefined
/** MySQL or MariaDB for the Drizzle store's MySQL dialect (`mysql://root@127.0.0.1:3306/test`). */
export const mysqlUrl = process.env.MYSQL_URL || undefined

/** What every test schema's name ends with: `_p` and the pid of the test process that owns it. */
export const testSchemaSuffix = /_p([0-9]+)$/

/**
 * The Postgres schema a test file works in: `base` plus this process's pid, so two test runs on
 * one database (two checkouts, a run beside `npm run bench`) never drop each other's tables.
 * Schemas left by a killed run are dropped by the next run's global setup.
 */
export function testSchema(base: string): string {
  return `${base}_p${process.pid}`
}
