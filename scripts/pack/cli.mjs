// The pack check's CLI step: the installed bin against the stores the environment names.
import { existsSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fail, log, npmEnv, pkg, run } from './common.mjs'

/**
 * Runs the installed CLI (node_modules/.bin/idempotent-mutations, so through its shebang) with
 * the records an app would leave: an in-progress and a completed key, written by the packed
 * stores over the drivers installed beside them.
 */
export function checkCli(consumer) {
  const bin = join(consumer, 'node_modules/.bin/idempotent-mutations')
  if (!existsSync(bin)) fail('npm linked no node_modules/.bin/idempotent-mutations')
  const { DATABASE_URL, REDIS_URL, ...withoutStores } = npmEnv
  const cli = (args, env = {}) => {
    try {
      return { code: 0, stdout: run(bin, args, consumer, { ...withoutStores, ...env }) }
    } catch (error) {
      return { code: error.status, stdout: error.stdout, stderr: error.stderr }
    }
  }
  const help = cli(['--help'])
  if (help.code !== 0 || !help.stdout.startsWith('Usage: idempotent-mutations')) {
    fail(`idempotent-mutations --help: exit ${help.code}\n${help.stdout}${help.stderr}`)
  }
  const usage = cli(['inspect', 'k'], { DATABASE_URL: 'postgres://unused' })
  if (usage.code !== 2 || !/--operation/.test(usage.stderr)) {
    fail(`idempotent-mutations inspect without --operation: exit ${usage.code}\n${usage.stderr}`)
  }
  log('the CLI runs from node_modules/.bin: --help, and exit 2 on a usage error')
  writeFileSync(join(consumer, 'cli-records.mjs'), cliRecordsFile(pkg.name))
  for (const [variable, url] of [
    ['DATABASE_URL', DATABASE_URL],
    ['REDIS_URL', REDIS_URL],
  ]) {
    if (!url) {
      log(`skipped the CLI on a real store: ${variable} is not set`)
      continue
    }
    const env = { [variable]: url }
    const prefix = `pack-check-cli:${process.pid}:`
    const schema = `im_pack_check_cli_p${process.pid}`
    const location = variable === 'REDIS_URL' ? ['--prefix', prefix] : ['--schema', schema]
    const where = ['--operation', 'orders.create', '--scope', 'tenant-1', ...location]
    try {
      run(process.execPath, ['cli-records.mjs', 'write', prefix, schema], consumer, {
        ...withoutStores,
        ...env,
      })
      const expect = (args, code, pattern) => {
        const result = cli(args, env)
        if (result.code !== code || !pattern.test(result.stdout)) {
          fail(
            `idempotent-mutations ${args.join(' ')} (${variable}): exit ${result.code}, expected ${code} and ${pattern}\n${result.stdout}${result.stderr ?? ''}`,
          )
        }
      }
      expect(['inspect', 'running', ...where, '--json'], 0, /"status": "in_progress"/)
      expect(['inspect', 'done', ...where], 0, /status\s+completed/)
      expect(['inspect', 'absent', ...where], 1, /^No record of key "absent"/)
      expect(['release', 'running', ...where], 1, /^Refused: /)
      expect(['release', 'running', ...where, '--force'], 0, /^Released key "running"/)
      expect(['release', 'done', ...where, '--json'], 0, /"released": true/)
      expect(['inspect', 'done', ...where], 1, /^No record/)
      expect(['sweep', ...location], 0, /^Swept \d+/)
      log(
        `the CLI inspected, released and swept on ${variable === 'REDIS_URL' ? 'Redis' : 'PostgreSQL'}`,
      )
    } finally {
      run(process.execPath, ['cli-records.mjs', 'clean', prefix, schema], consumer, {
        ...withoutStores,
        ...env,
      })
    }
  }
}

/** Writes (or cleans up) the records the CLI check inspects, with the packed stores. */
function cliRecordsFile(name) {
  return `const [action, prefix, schema] = process.argv.slice(2)
const { storedScope } = await import('${name}')
const scope = storedScope({ scope: 'tenant-1', operation: 'orders.create' })
let store
let close
let clean
if (process.env.REDIS_URL) {
  const { Redis } = await import('ioredis')
  const { createRedisStore } = await import('${name}/redis')
  const client = new Redis(process.env.REDIS_URL, { lazyConnect: true })
  await client.connect()
  store = createRedisStore(client, { prefix })
  clean = async () => {
    for (const key of ['running', 'done']) await client.del(store.recordKey(scope, key))
  }
  close = () => client.quit()
} else {
  const { default: postgres } = await import('postgres')
  const { drizzle } = await import('drizzle-orm/postgres-js')
  const { createDrizzleStore, defineIdempotencyTable } = await import('${name}/drizzle')
  const client = postgres(process.env.DATABASE_URL, { max: 1, onnotice: () => {} })
  store = createDrizzleStore(drizzle({ client }), { table: defineIdempotencyTable('idempotency_keys', schema) })
  clean = () => client.unsafe('drop schema if exists "' + schema + '" cascade')
  close = () => client.end()
}
try {
  if (action === 'write') {
    await store.ensureTable?.()
    for (const key of ['running', 'done']) {
      const claim = { scope, key, fingerprint: 'f', leaseToken: key, lockTimeoutMs: 600000, ttlMs: 3600000 }
      if (!(await store.claim(claim)).claimed) throw new Error('the key ' + key + ' was taken')
    }
    await store.complete({ scope, key: 'done', leaseToken: 'done', response: '{"json":1}', ttlMs: 3600000 })
  } else {
    await clean()
  }
} finally {
  await close()
}
`
}
