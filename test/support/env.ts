/** Which real services this run talks to; suites that need a missing one are skipped. */
export const databaseUrl = process.env.DATABASE_URL || undefined
export const redisUrl = process.env.REDIS_URL || undefined
