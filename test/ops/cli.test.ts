import { randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createClient as createLibsqlClient } from '@libsql/client'
import { sql } from 'drizzle-orm'
import { drizzle as drizzleLibsql } from 'drizzle-orm/libsql'
import { drizzle as drizzleMysql } from 'drizzle-orm/mysql2'
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js'
import mysql from 'mysql2/promise'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { runCli as runCommandLine } from '../../cli/run'
import { type InspectableStore, storedScope } from '../../src'
import {
  createDrizzleStore,
  defineIdempotencyTable,
  defineMySqlIdempotencyTable,
  defineSQLiteIdempotencyTable,
} from '../../src/stores/drizzle'
import { createRedisStore } from '../../src/stores/redis'
import { databaseUrl, mysqlUrl, redisUrl, testSchema } from '../support/env'
import { type CliEnvironment, jsonOf, removeBuiltCli, runCli } from './cli'

afterAll(removeBuiltCli)

const operation = 'orders.create'
const scope = storedScope({ scope: 'tenant-1', operation })
const where = ['--operation', operation, '--scope', 'tenant-1']

/** A store the test writes records into, and how the CLI finds the same records. */
interface CliTarget {
  store: InspectableStore
  env: CliEnvironment
  /** --table/--schema or --prefix. */
  location: string[]
  /** What the CLI names as its store. */
  description: RegExp
  blocked?: string[]
  /** The store deletes expired records itself (Redis): sweep has nothing to do. */
  selfExpiring?: boolean
}

/** Claims `key` under a lease of `lockTimeoutMs`; completes it with `response` unless undefined. */
async function record(
  store: InspectableStore,
  key: string,
  options: { lockTimeoutMs?: number; ttlMs?: number; response?: string | null } = {},
) {
  const input = {
    scope,
    key,
    fingerprint: 'fingerprint-a',
    leaseToken: randomUUID(),
    lockTimeoutMs: options.lockTimeoutMs ?? 600_000,
    ttlMs: options.ttlMs ?? 3_600_000,
  }
  const claim = await store.claim(input)
  if (!claim.claimed) throw new Error('the key was taken')
  if (options.response !== undefined) {
    await store.complete({ ...input, response: options.response, ttlMs: input.ttlMs })
  }
  return input
}

/** Waits until the store's clock has passed `key`'s expiry. */
async function untilExpired(store: InspectableStore, key: string) {
  for (;;) {
    const inspection = await store.inspect(scope, key)
    if (inspection === undefined || inspection.expiresAt <= inspection.now) return
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

/** The CLI's behaviour on one store: inspect, release (refused, forced, completed), sweep. */
function describeCliOn(name: string, target: () => CliTarget, full = true) {
  const cli = (...args: string[]) => {
    const { env, location, blocked } = target()
    return runCli([...args, ...location], env, blocked)
  }

  it(`inspect shows an in-progress key: its live lease, and the 409 a retry gets [${name}]`, async () => {
    const { store, description } = target()
    const key = `k-${randomUUID()}`
    await record(store, key)
    const text = await cli('inspect', key, ...where)
    expect(text.code, text.stderr).toBe(0)
    expect(text.stdout).toMatch(/status\s+in progress under a live lease/)
    expect(text.stdout).toMatch(/lease ends\s+\S+Z \(in 9m 5\ds\)|lease ends\s+\S+Z \(in 10m 0s\)/)
    expect(text.stdout).toMatch(/a retry gets\s+409 IN_PROGRESS \(Retry-After \d+\)/)
    expect(text.stdout).toMatch(/operation\s+orders\.create\nscope\s+tenant-1/)
    const json = jsonOf(await cli('inspect', key, ...where, '--json'))
    expect(json).toMatchObject({
      found: true,
      record: {
        key,
        scope: 'tenant-1',
        operation,
        status: 'in_progress',
        leaseLive: true,
        expired: false,
        responseBytes: null,
        fingerprint: 'fingerprint-a',
      },
    })
    expect(Date.parse(json.record!.lockedUntil as string)).toBeGreaterThan(Date.now())
    if (full) expect(description).toBeInstanceOf(RegExp)
  })

  it(`inspect shows a completed key and its response size; a missing key exits 1 [${name}]`, async () => {
    const key = `k-${randomUUID()}`
    await record(target().store, key, { response: '{"json":{"id":"é"}}' })
    const json = jsonOf(await cli('inspect', key, ...where, '--json'))
    expect(json.record).toMatchObject({ status: 'completed', responseBytes: 20, leaseLive: false })
    expect(json.record!.lockedUntil).toBeUndefined()
    const text = await cli('inspect', key, ...where)
    expect(text.stdout).toMatch(/response\s+20 bytes/)
    expect(text.stdout).toMatch(/a retry gets\s+the recorded response, replayed/)
    const missing = await cli('inspect', `k-${randomUUID()}`, ...where)
    expect(missing.code).toBe(1)
    expect(missing.stdout).toMatch(
      /^No record of key "k-[^"]+" of operation "orders\.create", scope "tenant-1" in /,
    )
    expect(missing.stdout).toMatch(target().description)
    // Another caller scope is another record.
    expect((await cli('inspect', key, '--operation', operation, '--json')).code).toBe(1)
  })

  it(`release is refused while the lease is live, and --force deletes the record [${name}]`, async () => {
    const { store } = target()
    const key = `k-${randomUUID()}`
    const claim = await record(store, key)
    const refused = await cli('release', key, ...where)
    expect(refused.code).toBe(1)
    expect(refused.stdout).toMatch(
      /^Refused: key "k-[^"]+" is in progress under a live lease until /,
    )
    expect(refused.stdout).toMatch(/pass --force/)
    expect(await store.inspect(scope, key)).toMatchObject({ status: 'in_progress' })
    const forced = await cli('release', key, ...where, '--force', '--json')
    expect(forced.code, forced.stderr).toBe(0)
    expect(jsonOf(forced)).toMatchObject({ released: true, record: { status: 'in_progress' } })
    expect(await store.inspect(scope, key)).toBeUndefined()
    // The executor it was forced from lost its lease.
    expect(await store.complete({ ...claim, response: 'late', ttlMs: 60_000 })).toBe(false)
    const again = await cli('release', key, ...where)
    expect(again.code).toBe(1)
    expect(again.stdout).toMatch(/nothing to release/)
  })

  if (!full) return

  it(`release deletes a completed key and says what becomes of replay-cache copies [${name}]`, async () => {
    const { store } = target()
    const key = `k-${randomUUID()}`
    await record(store, key, { response: 'recorded' })
    const released = await cli('release', key, ...where)
    expect(released.code, released.stderr).toBe(0)
    expect(released.stdout).toMatch(
      /it was completed\.\nThe next request with this key runs anew\./,
    )
    expect(released.stdout).toMatch(/replayCache\.maxAge \(1m by default\)/)
    expect(await store.inspect(scope, key)).toBeUndefined()
  })

  it(`release deletes an in-progress key whose lease ended, without --force [${name}]`, async () => {
    const { store } = target()
    const key = `k-${randomUUID()}`
    await record(store, key, { lockTimeoutMs: 1 })
    for (;;) {
      const inspection = (await store.inspect(scope, key))!
      if (inspection.lockedUntil! <= inspection.now) break
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
    const text = await cli('inspect', key, ...where)
    expect(text.stdout).toMatch(/status\s+in progress, its lease ended/)
    expect(text.stdout).toMatch(/a retry gets\s+the same payload takes the key over/)
    const released = await cli('release', key, ...where, '--json')
    expect(jsonOf(released)).toMatchObject({ released: true, record: { leaseLive: false } })
  })

  it(`sweep deletes only expired records, paced if asked [${name}]`, async () => {
    const { store, selfExpiring } = target()
    const expired = [`k-${randomUUID()}`, `k-${randomUUID()}`, `k-${randomUUID()}`]
    const live = `k-${randomUUID()}`
    for (const key of expired) await record(store, key, { response: 'short', ttlMs: 1 })
    await record(store, live, { response: 'long' })
    for (const key of expired) await untilExpired(store, key)
    const swept = await cli('sweep', '--batch-size', '2', '--pause', '5ms', '--json')
    expect(swept.code, swept.stderr).toBe(0)
    expect(jsonOf(swept)).toEqual({ swept: selfExpiring ? 0 : expired.length })
    for (const key of expired) expect(await store.inspect(scope, key)).toBeUndefined()
    expect(await store.inspect(scope, live)).toMatchObject({ status: 'completed' })
    const text = await cli('sweep')
    expect(text.stdout).toMatch(
      selfExpiring ? /Redis deletes expired records itself/ : /^Swept 0 expired records from /,
    )
  })
}

describe('the CLI without a store', () => {
  it.each([
    [[], {}, /^Usage: idempotent-mutations <command>/],
    [['inspect', 'k'], {}, /set DATABASE_URL or REDIS_URL/],
    [['inspect', 'k'], { DATABASE_URL: 'postgres://x' }, /which operation\? .*--operation <name>/],
    [['inspect'], { DATABASE_URL: 'postgres://x' }, /inspect needs the key/],
    [['release', 'a', 'b', '--operation', 'o'], { DATABASE_URL: 'postgres://x' }, /one key/],
    [
      ['inspect', 'k', '--operation', 'o', '--force'],
      { DATABASE_URL: 'postgres://x' },
      /--force is an option of release only/,
    ],
    [
      ['sweep', '--pause', 'soon'],
      { DATABASE_URL: 'postgres://x' },
      /--pause must be a duration like 150ms/,
    ],
    [
      ['inspect', 'k', '--operation', 'o', '--pause', '5ms'],
      { DATABASE_URL: 'postgres://x' },
      /--pause is an option of sweep only/,
    ],
    [
      ['sweep', '--limit', '1.5'],
      { DATABASE_URL: 'postgres://x' },
      /--limit must be an integer of at least 0/,
    ],
    [
      ['sweep', '--operation', 'o'],
      { DATABASE_URL: 'postgres://x' },
      /--operation is an option of inspect and release/,
    ],
    [
      ['sweep'],
      { DATABASE_URL: 'postgres://x', REDIS_URL: 'redis://x' },
      /both DATABASE_URL and REDIS_URL/,
    ],
    [['purge'], { DATABASE_URL: 'postgres://x' }, /unknown command "purge"/],
    [['sweep', '--bogus'], { DATABASE_URL: 'postgres://x' }, /Unknown option '--bogus'/],
    [['sweep'], { DATABASE_URL: 'oracle://x' }, /must start with postgres:\/\//],
    [['sweep', '--prefix', 'p:'], { DATABASE_URL: 'postgres://x' }, /--prefix is for REDIS_URL/],
  ])('%j with %j exits 2 and says why', async (args, env, message) => {
    // In this process: a usage error is found before any store is opened.
    const out: string[] = []
    const err: string[] = []
    const code = await runCommandLine(args, env, {
      out: (text) => out.push(text),
      err: (text) => err.push(text),
    })
    expect(code).toBe(2)
    expect(err.join('\n')).toMatch(message)
    expect(out).toEqual([])
  })

  it('--help prints the usage and exits 0', async () => {
    const run = await runCli(['--help'], {})
    expect(run.code).toBe(0)
    expect(run.stdout).toMatch(/^Usage: idempotent-mutations <command> \[options\]/)
    expect(run.stdout).toMatch(/Exit codes: 0 found or done, 1 not found or refused, 2 usage/)
  })

  it('names the drivers to install when none is, and exits 2', async () => {
    const pg = await runCli(['sweep'], { DATABASE_URL: 'postgres://x' }, ['postgres', 'pg'])
    expect(pg.code).toBe(2)
    expect(pg.stderr).toMatch(
      /needs a PostgreSQL driver installed .*: postgres \(postgres\.js\) or pg/,
    )
    const redis = await runCli(['sweep'], { REDIS_URL: 'redis://x' }, ['ioredis', 'redis'])
    expect(redis.code).toBe(2)
    expect(redis.stderr).toMatch(/REDIS_URL needs a Redis client installed .*: ioredis or redis/)
    const drizzle = await runCli(['sweep'], { DATABASE_URL: 'postgres://x' }, ['drizzle-orm'])
    expect(drizzle.stderr).toMatch(/needs drizzle-orm installed/)
  })

  it('exits 3 with the reason when the store cannot be reached', async () => {
    const run = await runCli(['sweep'], { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none' })
    expect(run.code).toBe(3)
    expect(run.stderr).toMatch(/^idempotent-mutations: the store failed: .*ECONNREFUSED/)
  })
})

describe('the CLI on SQLite (libSQL, a file)', () => {
  const folder = mkdtempSync(join(tmpdir(), 'im-cli-'))
  const file = join(folder, 'records.db')
  const client = createLibsqlClient({ url: `file:${file}` })
  const store = createDrizzleStore(drizzleLibsql({ client }), {
    table: defineSQLiteIdempotencyTable('cli_records'),
  })
  beforeAll(() => store.ensureTable())
  afterAll(() => {
    client.close()
    rmSync(folder, { recursive: true, force: true })
  })
  describeCliOn(
    'sqlite',
    () => ({
      store,
      env: { DATABASE_URL: `file:${file}` },
      location: ['--table', 'cli_records'],
      description: /SQLite \(libSQL\), table "cli_records"/,
    }),
    false,
  )
})

const noPostgres = databaseUrl ? '' : ' (skipped: DATABASE_URL is not set)'

describe.skipIf(!databaseUrl)(`the CLI on PostgreSQL [postgres]${noPostgres}`, () => {
  const client = postgres(databaseUrl ?? 'postgres://unset', { max: 2, onnotice: () => {} })
  const db = drizzlePostgres({ client })
  const schema = testSchema('im_test_cli')
  const store = createDrizzleStore(db, { table: defineIdempotencyTable('records', schema) })
  beforeAll(async () => {
    await db.execute(sql.raw(`drop schema if exists "${schema}" cascade`))
    await store.ensureTable()
  })
  afterAll(async () => {
    await db.execute(sql.raw(`drop schema if exists "${schema}" cascade`))
    await client.end()
  })
  const target = (blocked: string[], description: RegExp) => () => ({
    store,
    env: { DATABASE_URL: databaseUrl! },
    location: ['--schema', schema, '--table', 'records'],
    description,
    blocked,
  })
  describe('through postgres.js', () => {
    describeCliOn(
      'postgres.js',
      target([], /PostgreSQL \(postgres\.js\), table "im_test_cli_p\d+"\."records"/),
    )
  })
  describe('through node-postgres, when postgres.js is not installed', () => {
    describeCliOn('pg', target(['postgres'], /PostgreSQL \(node-postgres\), table /), false)
  })
})

const noRedis = redisUrl ? '' : ' (skipped: REDIS_URL is not set)'

describe.skipIf(!redisUrl)(`the CLI on Redis [redis]${noRedis}`, () => {
  let client: import('ioredis').Redis
  let store: InspectableStore
  const prefix = `idem-test:cli:${randomUUID().slice(0, 8)}:`
  beforeAll(async () => {
    const { Redis } = await import('ioredis')
    client = new Redis(redisUrl!, { lazyConnect: true })
    await client.connect()
    store = createRedisStore(client, { prefix })
  })
  afterAll(() => client.quit())
  const target = (blocked: string[], description: RegExp) => () => ({
    store,
    env: { REDIS_URL: redisUrl! },
    location: ['--prefix', prefix],
    description,
    blocked,
    selfExpiring: true,
  })
  describe('through ioredis', () => {
    describeCliOn('ioredis', target([], /Redis \(ioredis\), prefix "idem-test:cli:/))
  })
  describe('through node-redis, when ioredis is not installed', () => {
    describeCliOn('node-redis', target(['ioredis'], /Redis \(node-redis\), prefix /), false)
  })
})

const noMysql = mysqlUrl ? '' : ' (skipped: MYSQL_URL is not set)'

describe.skipIf(!mysqlUrl)(`the CLI on MariaDB (mysql2) [mysql]${noMysql}`, () => {
  const pool = mysql.createPool({ uri: mysqlUrl ?? 'mysql://unset', connectionLimit: 2 })
  const table = `im_test_cli_p${process.pid}`
  const store = createDrizzleStore(drizzleMysql({ client: pool }), {
    table: defineMySqlIdempotencyTable(table),
  })
  beforeAll(async () => {
    await pool.query(`drop table if exists \`${table}\``)
    await store.ensureTable()
  })
  afterAll(async () => {
    await pool.query(`drop table if exists \`${table}\``)
    await pool.end()
  })
  describeCliOn(
    'mysql2',
    () => ({
      store,
      env: { DATABASE_URL: mysqlUrl! },
      location: ['--table', table],
      description: new RegExp(`MySQL/MariaDB \\(mysql2\\), table "${table}"`),
    }),
    false,
  )
})
