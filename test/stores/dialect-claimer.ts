/**
 * A child process for the multi-process races on MySQL and SQLite (./dialect-processes.test.ts):
 * it opens the database named in argv, says `ready`, and runs each `run` message it gets as that
 * many concurrent calls, answering with their results.
 */
import { randomUUID } from 'node:crypto'
import { createClient } from '@libsql/client'
import { drizzle as drizzleBetterSqlite3 } from 'drizzle-orm/better-sqlite3'
import { drizzle as drizzleLibsql } from 'drizzle-orm/libsql'
import { drizzle as drizzleMysql } from 'drizzle-orm/mysql2'
import mysql from 'mysql2/promise'
import { createIdempotency, isIdempotencyError } from '../../src'
import {
  createDrizzleStore,
  defineMySqlIdempotencyTable,
  defineSQLiteIdempotencyTable,
} from '../../src/stores/drizzle'
import { betterSqlite3, sqliteBusyTimeoutMs, sqlitePragmas } from './sqlite-binding'

export interface ClaimerConfig {
  driver: 'mysql2' | 'libsql' | 'better-sqlite3'
  /** A MySQL URL, or a SQLite file's path. */
  target: string
  table: string
}

export type ClaimerRun =
  | { type: 'run'; id: number; op: 'execute'; key: string; count: number }
  | { type: 'run'; id: number; op: 'claim'; key: string; count: number; lockTimeoutMs: number }

export type ClaimerResult =
  | { ran: boolean; replayed: boolean; value: unknown }
  | { error: string }
  | { claimed: boolean; takeover: boolean; token: string; recordToken: string }

async function open(config: ClaimerConfig) {
  if (config.driver === 'mysql2') {
    const pool = mysql.createPool({ uri: config.target, connectionLimit: 5 })
    const db = drizzleMysql({ client: pool })
    return createDrizzleStore(db, { table: defineMySqlIdempotencyTable(config.table) })
  }
  const table = defineSQLiteIdempotencyTable(config.table)
  if (config.driver === 'libsql') {
    const client = createClient({ url: `file:${config.target}`, timeout: sqliteBusyTimeoutMs })
    for (const pragma of sqlitePragmas) await client.execute(pragma)
    return createDrizzleStore(drizzleLibsql({ client }), { table })
  }
  const loader = betterSqlite3()
  if (!loader.load) throw new Error(loader.reason)
  const client = loader.load(config.target)
  for (const pragma of sqlitePragmas) client.exec(pragma)
  return createDrizzleStore(drizzleBetterSqlite3({ client }), { table })
}

const config = JSON.parse(process.argv[2]!) as ClaimerConfig
const store = await open(config)
const idempotency = createIdempotency({ store, replayCache: false })

async function run(message: ClaimerRun): Promise<ClaimerResult[]> {
  const calls = Array.from({ length: message.count }, async (): Promise<ClaimerResult> => {
    if (message.op === 'claim') {
      const token = randomUUID()
      const result = await store.claim({
        scope: 's',
        key: message.key,
        fingerprint: 'f',
        leaseToken: token,
        lockTimeoutMs: message.lockTimeoutMs,
        ttlMs: 60_000,
      })
      return {
        claimed: result.claimed,
        takeover: result.claimed && result.takeover,
        token,
        recordToken: result.record.leaseToken,
      }
    }
    let ran = false
    try {
      const { replayed, value } = await idempotency.execute(
        { key: message.key, operation: 'orders.create', payload: { item: 'lamp' } },
        async () => {
          ran = true
          return { pid: process.pid, at: randomUUID() }
        },
      )
      return { ran, replayed, value }
    } catch (error) {
      return { error: isIdempotencyError(error) ? error.code : String(error) }
    }
  })
  return Promise.all(calls)
}

process.on('message', (message: ClaimerRun) => {
  void run(message).then(
    (results) => process.send!({ type: 'done', id: message.id, results }),
    (error: unknown) => process.send!({ type: 'failed', id: message.id, error: String(error) }),
  )
})
process.send!({ type: 'ready', pid: process.pid })
