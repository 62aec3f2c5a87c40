import { databaseUrl, redisUrl } from './env'

/** Prints, once per run, which service-backed suites run and which are skipped. */
export default function setup(): void {
  const ran: string[] = ['memory', 'PGlite']
  const skipped: string[] = []
  ;(databaseUrl ? ran : skipped).push('PostgreSQL (DATABASE_URL)')
  ;(redisUrl ? ran : skipped).push('Redis (REDIS_URL)')
  const line = skipped.length
    ? `[idempotent-mutations tests] stores: ${ran.join(', ')}; skipped suites: ${skipped.join(', ')} (variable not set)`
    : `[idempotent-mutations tests] stores: ${ran.join(', ')}; no suite skipped`
  console.log(line)
}
