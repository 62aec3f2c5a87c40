// The pack check's postgres.js 4 step: a project on the current postgres.js major installs the
// tarball without flags (the peer range takes it), and, with DATABASE_URL, the Drizzle store runs
// on it: a first execution, its replay, a reused key, a transactional execution and a sweep.
import { mkdirSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fail, log, pkg, run, runsOnceLines } from './common.mjs'

export function checkCurrentPostgres(postgresVersion, drizzleVersion, tarball) {
  const app = join(dirname(tarball), 'current-postgres')
  mkdirSync(app)
  writeFileSync(join(app, 'package.json'), JSON.stringify({ private: true, type: 'module' }))
  const drivers = [`postgres@${postgresVersion}`, `drizzle-orm@${drizzleVersion}`]
  const flags = ['install', '--no-audit', '--no-fund', '--ignore-scripts', '--prefer-offline']
  run('npm', [...flags, ...drivers], app)
  try {
    run('npm', [...flags, tarball], app)
  } catch (error) {
    fail(
      `npm install of the tarball beside ${drivers.join(', ')}: ${error.stderr || error.message}`,
    )
  }
  log(`installed the tarball, without flags, into a project that has ${drivers.join(', ')}`)
  if (!process.env.DATABASE_URL) {
    log('skipped running the Drizzle store on postgres.js 4: DATABASE_URL is not set')
    return
  }
  writeFileSync(join(app, 'postgres.mjs'), postgresFile(pkg.name))
  try {
    log(run(process.execPath, ['postgres.mjs'], app).trim())
  } catch (error) {
    fail(
      `the Drizzle store on ${drivers.join(', ')}: ${error.stdout}${error.stderr || error.message}`,
    )
  }
}

/** The store on postgres.js, in a schema of its own that it drops at the end. */
function postgresFile(name) {
  return `import { readFileSync } from 'node:fs'
import { sql } from 'drizzle-orm'
import { drizzle } from 'drizzle-orm/postgres-js'
import postgres from 'postgres'
import { createIdempotency, KeyReusedError } from '${name}'
import { createDrizzleStore, defineIdempotencyTable } from '${name}/drizzle'

const client = postgres(process.env.DATABASE_URL, { max: 4, onnotice: () => {} })
const db = drizzle({ client })
const schema = 'pack_check_pg_' + process.pid
const store = createDrizzleStore(db, { table: defineIdempotencyTable('records', schema) })
const idempotency = createIdempotency({ store, ttl: '1s', sweepInterval: false })
try {
  await store.ensureTable()
  await client.unsafe('create table "' + schema + '".orders (id serial primary key, amount int)')
  ${runsOnceLines("'postgres.js'")}
  const insert = (tx, amount) =>
    tx.execute(sql.raw('insert into "' + schema + '".orders (amount) values (' + amount + ') returning id'))
  const tx = { key: 'k-2', operation: 'pay', payload: { amount: 3 }, transactional: true }
  const committed = await idempotency.execute(tx, async ({ tx: handle }) => (await insert(handle, 3)).length)
  const replayed = await idempotency.execute(tx, async ({ tx: handle }) => (await insert(handle, 4)).length)
  const [{ count }] = await client.unsafe('select count(*)::int as count from "' + schema + '".orders')
  if (committed.value !== 1 || !replayed.replayed || count !== 1) {
    throw new Error('transactional mode did not run once: ' + JSON.stringify({ committed, replayed, count }))
  }
  await client.unsafe('update "' + schema + '".records set expires_at = now() - interval \\'1 second\\'')
  const swept = await idempotency.sweep({ batchSize: 1, pause: 1 })
  if (swept !== 2) throw new Error('the sweep deleted ' + swept + ' records, not 2')
  const { version } = JSON.parse(readFileSync('node_modules/postgres/package.json', 'utf8'))
  console.log('the Drizzle store ran on postgres.js ' + version + ': first execution, replay, 422, transactional mode, sweep')
} finally {
  await client.unsafe('drop schema if exists "' + schema + '" cascade')
  await idempotency.close()
  await client.end()
}
`
}
