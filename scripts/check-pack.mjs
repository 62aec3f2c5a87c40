#!/usr/bin/env node
// The pack check: what users install must work. It builds the package (tsup, with .d.ts), packs
// it with `npm pack`, installs the tarball and the peers into an empty project, and then:
// - plain Node imports every subpath export (ESM) and checks its public names, each with the
//   peers it does not need blocked, so a user of one adapter installs nothing for the others;
// - a CommonJS file `require`s every subpath (Node 20.19+ loads the ESM build through require);
// - the real drizzle-kit CLI generates a migration from a schema that re-exports the table, in a
//   CommonJS project and in an ESM one, and it matches schema.sql;
// - the CLI (the package's bin) runs from node_modules/.bin: its usage and exit codes, and, when
//   DATABASE_URL and REDIS_URL are set, inspect, release and sweep against real PostgreSQL
//   (through postgres.js) and Redis (through ioredis), the drivers installed beside it;
// - tsc compiles a user file under the settings users have: nodenext with
//   exactOptionalPropertyTypes, node10 resolution (`module: commonjs`), and a GraphQL-only app
//   with skipLibCheck off and no tRPC package installed, and an Apollo Server app with neither
//   tRPC nor Envelop installed.
// The work happens in a temporary folder; the repository's own dist/ is not touched.
//
//   node scripts/check-pack.mjs          (npm run pack:check)
//   KEEP_PACK_CHECK=1 node scripts/...   keeps the temporary folder for a look
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { checkCli } from './pack/cli.mjs'
import { fail, log, npmEnv, pkg, root, run, runsOnceLines } from './pack/common.mjs'
import { checkCurrentPostgres } from './pack/postgres-current.mjs'
import { checkTelemetry, nodeAtLeast } from './pack/telemetry.mjs'

const require = createRequire(join(root, 'package.json'))
// tsup reads tsup.config.ts and tsconfig.json from the working directory.
process.chdir(root)

/**
 * What each subpath must export, which optional peers it may load, and (`avoids`) which of the
 * package's own dependencies it must not load. A subpath in package.json's exports that is
 * missing here fails the check: add it.
 */
const subpaths = {
  '.': {
    peers: [],
    names: [
      'createIdempotency',
      'createMemoryStore',
      'IdempotencyError',
      'KeyRequiredError',
      'KeyInvalidError',
      'KeyReusedError',
      'InProgressError',
      'StoreUnavailableError',
      'OutcomeUnknownError',
      'ResponseNotStoredError',
      'isIdempotencyError',
      'idempotencyErrorStatus',
      'defaultCodec',
      'defaultStoreErrors',
      'defaultLogger',
      'defaultIdempotencyOptions',
      'defaultReplayCacheOptions',
      'fingerprint',
      'readKeyHeader',
      'ReplayedError',
      'storedScope',
      'parseStoredScope',
    ],
  },
  './drizzle': {
    peers: ['drizzle-orm'],
    names: [
      'createDrizzleStore',
      'idempotencyKeys',
      'defineIdempotencyTable',
      'createTableStatements',
      'mysqlIdempotencyKeys',
      'defineMySqlIdempotencyTable',
      'createMySqlTableStatements',
      'sqliteIdempotencyKeys',
      'defineSQLiteIdempotencyTable',
      'createSQLiteTableStatements',
      'TransactionalModeUnsupportedError',
    ],
  },
  './redis': {
    peers: ['ioredis', 'redis'],
    names: ['createRedisStore'],
    // The store writes the engine's text as it is: no codec, no canonical JSON.
    avoids: ['superjson', 'safe-stable-stringify'],
  },
  './trpc': { peers: ['@trpc/server'], names: ['createIdempotencyMiddleware'] },
  './envelop': {
    peers: ['@envelop/core', 'graphql'],
    names: ['useIdempotency', 'idempotentDirectiveTypeDefs'],
  },
  './apollo': {
    peers: ['@apollo/server', 'graphql'],
    names: ['idempotencyPlugin', 'idempotentDirectiveTypeDefs', 'defaultStoreGraphQLErrors'],
  },
  './client': {
    peers: ['@trpc/client', '@trpc/server', 'graphql'],
    names: ['idempotencyLink', 'idempotentFetch'],
  },
  './client/fetch': { peers: [], names: ['idempotentFetch', 'defaultRetryOn'] },
  './testing': { peers: ['vitest'], names: ['describeStoreConformance', 'createTestClock'] },
  './fetch': {
    peers: [],
    names: ['withIdempotency', 'idempotencyContext', 'defaultHttpStoreStatus'],
  },
  './hono': { peers: ['hono'], names: ['idempotency', 'defaultHttpStoreStatus'] },
  './express': { peers: [], names: ['idempotency', 'defaultHttpStoreStatus'] },
  './client/trpc': {
    peers: ['@trpc/client', '@trpc/server'],
    names: ['idempotencyLink', 'idempotencyHeaders', 'defaultRetryOn'],
  },
}

/** Each dialect's exported table and the SQL file shipped for it. */
const drizzleTables = [
  { dialect: 'postgresql', table: 'idempotencyKeys', file: 'src/stores/drizzle/schema.sql' },
  { dialect: 'mysql', table: 'mysqlIdempotencyKeys', file: 'src/stores/drizzle/schema.mysql.sql' },
  {
    dialect: 'sqlite',
    table: 'sqliteIdempotencyKeys',
    file: 'src/stores/drizzle/schema.sqlite.sql',
  },
]

const work = mkdtempSync(join(tmpdir(), 'im-pack-check-'))
try {
  // 1. Which subpaths have their source yet (adapters land one by one).
  const exportsMap = Object.entries(pkg.exports).filter(([name]) => name !== './package.json')
  const present = []
  const absent = []
  for (const [name, target] of exportsMap) {
    if (!subpaths[name])
      fail(`package.json exports ${name}, which scripts/check-pack.mjs does not know`)
    const entry = target.default.replace(/^\.\/dist\//, '').replace(/\.js$/, '')
    const source = `${entry}.ts`
    if (existsSync(join(root, source))) present.push({ name, entry, source, target })
    else absent.push({ name, source })
  }
  for (const { name, source } of absent) log(`skipping ${name}: ${source} does not exist yet`)

  // 2. Build into the staging copy of the package, with tsup.config.ts (its entries narrowed
  //    to the sources that exist while some are missing).
  const stage = join(work, 'package')
  mkdirSync(stage)
  const { build } = require('tsup')
  const started = Date.now()
  await build({
    outDir: join(stage, 'dist'),
    silent: true,
    ...(absent.length === 0
      ? {}
      : { entry: Object.fromEntries(present.map(({ entry, source }) => [entry, source])) }),
  })
  log(
    `built ${present.length} entries with .d.ts in ${Math.round((Date.now() - started) / 1000)} s`,
  )
  for (const { name, target } of present) {
    for (const file of [target.types, target.default]) {
      if (!existsSync(join(stage, file))) fail(`${name}: the build did not emit ${file}`)
    }
  }
  // One copy of the error classes, shared by every entry: `instanceof IdempotencyError` must
  // hold across subpaths.
  const jsFiles = listFiles(join(stage, 'dist')).filter((file) => file.endsWith('.js'))
  const definitions = jsFiles.filter((file) =>
    /\bIdempotencyError = class\b|class IdempotencyError\b/.test(readFileSync(file, 'utf8')),
  )
  if (definitions.length !== 1) {
    fail(`IdempotencyError is defined in ${definitions.length} built files, not 1`)
  }

  // 3. Pack what package.json's `files` lists.
  writeFileSync(join(stage, 'package.json'), JSON.stringify(pkg, null, 2))
  for (const file of pkg.files) {
    if (file === 'dist') continue
    if (!existsSync(join(root, file)))
      fail(`package.json files lists ${file}, which does not exist`)
    cpSync(join(root, file), join(stage, file), { recursive: true })
  }
  const [packed] = JSON.parse(
    run('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', work], stage),
  )
  const packedFiles = packed.files.map((file) => file.path)
  for (const required of [
    'package.json',
    ...drizzleTables.map(({ file }) => file),
    'src/stores/drizzle/sweep.sql',
    'dist/cli/index.js',
    'README.md',
    'LICENSE',
  ]) {
    if (!packedFiles.includes(required)) fail(`the tarball lacks ${required}`)
  }
  const leaked = packedFiles.filter(
    (file) =>
      !/^(dist\/|src\/stores\/drizzle\/(schema(\.mysql|\.sqlite)?|sweep)\.sql$|README\.md$|package\.json$|LICENSE$)/.test(
        file,
      ),
  )
  if (leaked.length > 0) fail(`the tarball holds files it should not: ${leaked.join(', ')}`)
  log(`packed ${packed.filename}: ${packedFiles.length} files, ${packed.size} bytes`)

  // 4. An empty project installs the tarball and the peers (the versions this repository
  //    develops against, so npm's cache usually has them).
  const consumer = join(work, 'consumer')
  mkdirSync(consumer)
  writeFileSync(
    join(consumer, 'package.json'),
    JSON.stringify({ name: 'pack-check-consumer', private: true, type: 'module' }),
  )
  // drizzle-kit for its CLI, @types/node for the user files tsc compiles.
  const peers = [
    ...new Set([
      ...present.flatMap(({ name }) => subpaths[name].peers),
      'drizzle-kit',
      '@types/node',
      // The CLI's PostgreSQL driver (an optional peer no subpath loads).
      'postgres',
    ]),
  ]
  const peerSpecs = peers.map((peer) => `${peer}@${installedVersion(peer)}`)
  run(
    'npm',
    [
      'install',
      '--no-audit',
      '--no-fund',
      '--no-package-lock',
      '--ignore-scripts',
      '--prefer-offline',
      join(work, packed.filename),
      ...peerSpecs,
    ],
    consumer,
  )
  log(`installed the tarball with ${peerSpecs.join(', ') || 'no peers'}`)
  if (!existsSync(join(consumer, 'node_modules', pkg.name, 'src/stores/drizzle/schema.sql'))) {
    fail('the installed package has no src/stores/drizzle/schema.sql')
  }

  // 5. Plain Node imports each subpath, with the peers it must not need blocked.
  writeFileSync(
    join(consumer, 'block-peers.mjs'),
    `export async function resolve(specifier, context, next) {
  for (const peer of JSON.parse(process.env.PACK_CHECK_BLOCKED)) {
    if (specifier === peer || specifier.startsWith(peer + '/')) {
      throw new Error('loads ' + specifier + ', which it must not need')
    }
  }
  return next(specifier, context)
}
`,
  )
  writeFileSync(
    join(consumer, 'register.mjs'),
    `import { register } from 'node:module'
register('./block-peers.mjs', import.meta.url)
`,
  )
  writeFileSync(
    join(consumer, 'import.mjs'),
    `const [subpath, names] = process.argv.slice(2)
const module = await import(subpath)
const missing = JSON.parse(names).filter((name) => module[name] === undefined)
if (missing.length > 0) throw new Error(subpath + ' lacks ' + missing.join(', '))
if (subpath === '${pkg.name}') {
  const { createIdempotency, createMemoryStore } = module
  const idempotency = createIdempotency({ store: createMemoryStore() })
  const request = { key: 'k', operation: 'pack.check' }
  await idempotency.execute(request, () => new Date(0))
  const { value, replayed } = await idempotency.execute(request, () => 'ran twice')
  if (!replayed || !(value instanceof Date)) throw new Error('the engine did not replay')
}
console.log(subpath + ': ' + Object.keys(module).length + ' exports')
`,
  )
  const allPeers = Object.keys(pkg.peerDependencies ?? {})
  for (const { name } of present) {
    const specifier = name === '.' ? pkg.name : `${pkg.name}/${name.slice(2)}`
    const blocked = [
      ...allPeers.filter((peer) => !subpaths[name].peers.includes(peer)),
      ...(subpaths[name].avoids ?? []),
    ]
    try {
      log(
        run(
          process.execPath,
          [
            '--import',
            './register.mjs',
            'import.mjs',
            specifier,
            JSON.stringify(subpaths[name].names),
          ],
          consumer,
          { ...npmEnv, PACK_CHECK_BLOCKED: JSON.stringify(blocked) },
        ).trim(),
      )
    } catch (error) {
      fail(`importing ${specifier} with plain Node: ${error.stderr || error.message}`)
    }
  }

  // 6. CommonJS: `require` of every subpath.
  const specifiers = present.map(({ name }) => specifierOf(name))
  writeFileSync(
    join(consumer, 'require.cjs'),
    `for (const [subpath, names] of JSON.parse(process.argv[2])) {
  const module = require(subpath)
  const missing = names.filter((name) => module[name] === undefined)
  if (missing.length > 0) throw new Error(subpath + ' (require) lacks ' + missing.join(', '))
}
console.log('require: ' + JSON.parse(process.argv[2]).length + ' subpaths')
`,
  )
  const requireList = present.map(({ name }) => [specifierOf(name), subpaths[name].names])
  try {
    log(run(process.execPath, ['require.cjs', JSON.stringify(requireList)], consumer).trim())
  } catch (error) {
    fail(`require() from a CommonJS file: ${error.stderr || error.message}`)
  }

  // 6b. The CLI, as `npx idempotent-mutations` runs it: the bin npm linked, its shebang, its
  //     exit codes, and inspect, release and sweep on real PostgreSQL and Redis.
  checkCli(consumer)

  // 7. drizzle-kit's CLI loads the schema with require: a CommonJS project and an ESM one, for
  //    each dialect's table; what it generates is the shipped SQL file of that dialect.
  if (specifiers.includes(`${pkg.name}/drizzle`)) {
    for (const { dialect, table, file } of drizzleTables) {
      const expected = normalizeSql(readFileSync(join(root, file), 'utf8'))
      for (const type of ['commonjs', 'module']) {
        const project = join(consumer, `drizzle-kit-${dialect}-${type}`)
        mkdirSync(project)
        writeFileSync(join(project, 'package.json'), JSON.stringify({ private: true, type }))
        writeFileSync(
          join(project, 'schema.ts'),
          `export { ${table} } from '${pkg.name}/drizzle'\n`,
        )
        try {
          run(
            process.execPath,
            [
              join(consumer, 'node_modules/drizzle-kit/bin.cjs'),
              'generate',
              '--dialect',
              dialect,
              '--schema',
              './schema.ts',
              '--out',
              './migrations',
            ],
            project,
          )
        } catch (error) {
          fail(
            `drizzle-kit generate (${dialect}, ${type}): ${error.stdout}${error.stderr || error.message}`,
          )
        }
        const migration = readdirSync(join(project, 'migrations')).find((name) =>
          name.endsWith('.sql'),
        )
        if (!migration) fail(`drizzle-kit generate (${dialect}, ${type}) wrote no migration`)
        const generated = normalizeSql(readFileSync(join(project, 'migrations', migration), 'utf8'))
        if (generated !== expected) {
          fail(
            `drizzle-kit (${dialect}, ${type}) generated:\n${generated}\n${file} has:\n${expected}`,
          )
        }
      }
    }
    log(
      `drizzle-kit generate loaded each dialect's table in a CommonJS and an ESM project: ${drizzleTables.map(({ file }) => file.split('/').pop()).join(', ')}`,
    )
  }

  // 8. TypeScript, under the settings users compile with.
  const typeChecks = present.map(({ name }, index) => {
    return `import * as m${index} from '${specifierOf(name)}'
export const names${index}: (keyof typeof m${index})[] = ${JSON.stringify(subpaths[name].names)}`
  })
  writeFileSync(join(consumer, 'check.ts'), `${typeChecks.join('\n')}\n`)
  writeFileSync(join(consumer, 'options.ts'), userOptionsFile(pkg.name))
  const baseOptions = { target: 'es2022', strict: true, noEmit: true, types: ['node'] }
  typeCheck(consumer, 'nodenext, exactOptionalPropertyTypes', ['check.ts', 'options.ts'], {
    ...baseOptions,
    module: 'nodenext',
    moduleResolution: 'nodenext',
    exactOptionalPropertyTypes: true,
    skipLibCheck: true,
  })
  const cjs = join(consumer, 'node10')
  mkdirSync(cjs)
  writeFileSync(join(cjs, 'package.json'), JSON.stringify({ private: true, type: 'commonjs' }))
  writeFileSync(join(cjs, 'check.ts'), `${typeChecks.join('\n')}\n`)
  typeCheck(cjs, 'module commonjs (node10 resolution)', ['check.ts'], {
    ...baseOptions,
    module: 'commonjs',
    moduleResolution: 'node10',
    esModuleInterop: true,
    skipLibCheck: true,
    ignoreDeprecations: '5.0',
  })
  // NestJS 11's default: nodenext in a CommonJS package (TypeScript 5.8+ lets it require ESM).
  writeFileSync(join(cjs, 'check-nodenext.ts'), `${typeChecks.join('\n')}\n`)
  typeCheck(cjs, 'nodenext in a CommonJS package', ['check-nodenext.ts'], {
    ...baseOptions,
    module: 'nodenext',
    moduleResolution: 'nodenext',
    skipLibCheck: true,
  })
  // A GraphQL-only app: the same node_modules without the tRPC packages, skipLibCheck off.
  const graphqlOnly = join(work, 'graphql-only')
  mkdirSync(join(graphqlOnly, 'node_modules'), { recursive: true })
  for (const entry of readdirSync(join(consumer, 'node_modules'))) {
    if (entry === '@trpc') continue
    symlinkSync(join(consumer, 'node_modules', entry), join(graphqlOnly, 'node_modules', entry))
  }
  writeFileSync(
    join(graphqlOnly, 'package.json'),
    JSON.stringify({ private: true, type: 'module' }),
  )
  writeFileSync(join(graphqlOnly, 'app.ts'), graphqlOnlyFile(pkg.name))
  typeCheck(graphqlOnly, 'a GraphQL-only app, skipLibCheck off', ['app.ts'], {
    ...baseOptions,
    module: 'nodenext',
    moduleResolution: 'nodenext',
    skipLibCheck: false,
  })
  // An Apollo Server app: the same node_modules without tRPC, Envelop or Yoga, skipLibCheck off.
  if (specifiers.includes(`${pkg.name}/apollo`)) {
    const apolloOnly = join(work, 'apollo-only')
    mkdirSync(join(apolloOnly, 'node_modules'), { recursive: true })
    for (const entry of readdirSync(join(consumer, 'node_modules'))) {
      if (['@trpc', '@envelop', 'graphql-yoga'].includes(entry)) continue
      symlinkSync(join(consumer, 'node_modules', entry), join(apolloOnly, 'node_modules', entry))
    }
    writeFileSync(
      join(apolloOnly, 'package.json'),
      JSON.stringify({ private: true, type: 'module' }),
    )
    writeFileSync(join(apolloOnly, 'app.ts'), apolloAppFile(pkg.name))
    typeCheck(apolloOnly, 'an Apollo Server app, skipLibCheck off', ['app.ts'], {
      ...baseOptions,
      module: 'nodenext',
      moduleResolution: 'nodenext',
      exactOptionalPropertyTypes: true,
      skipLibCheck: false,
    })
  }
  // 10. A store author's test file: the shipped conformance suite, run by vitest, on a store
  //     from the tarball.
  if (specifiers.includes(`${pkg.name}/testing`)) {
    writeFileSync(
      join(consumer, 'conformance.test.mjs'),
      `import { createMemoryStore } from '${pkg.name}'
import { createTestClock, describeStoreConformance } from '${pkg.name}/testing'
const clock = createTestClock()
describeStoreConformance({
  name: 'the memory store, from the tarball',
  createStore: () => createMemoryStore({ now: clock.now }),
  clock,
  concurrency: 100,
})
`,
    )
    try {
      const output = run(
        process.execPath,
        [join(consumer, 'node_modules/vitest/vitest.mjs'), 'run', 'conformance.test.mjs'],
        consumer,
        { ...npmEnv, NO_COLOR: '1', FORCE_COLOR: '0' },
      )
      const passed = /Tests\s+(\d+) passed/.exec(output)
      if (!passed) fail(`vitest ran no conformance case:\n${output}`)
      log(`vitest ran the shipped store conformance suite: ${passed[1]} cases passed`)
    } catch (error) {
      fail(
        `the shipped conformance suite under vitest: ${error.stdout}${error.stderr || error.message}`,
      )
    }
    // vitest 5 (the current major) needs Node 22 or newer: on those, the same file under it,
    // in a project of its own that installs the tarball beside vitest 5.
    if (Number(process.versions.node.split('.')[0]) >= 22) {
      const vitest5 = join(work, 'vitest5')
      mkdirSync(vitest5)
      writeFileSync(
        join(vitest5, 'package.json'),
        JSON.stringify({ name: 'pack-check-vitest5', private: true, type: 'module' }),
      )
      cpSync(join(consumer, 'conformance.test.mjs'), join(vitest5, 'conformance.test.mjs'))
      run(
        'npm',
        [
          'install',
          '--no-audit',
          '--no-fund',
          '--no-package-lock',
          '--ignore-scripts',
          '--prefer-offline',
          join(work, packed.filename),
          'vitest@5',
        ],
        vitest5,
      )
      const version = JSON.parse(
        readFileSync(join(vitest5, 'node_modules/vitest/package.json'), 'utf8'),
      ).version
      try {
        const output = run(
          process.execPath,
          [join(vitest5, 'node_modules/vitest/vitest.mjs'), 'run', 'conformance.test.mjs'],
          vitest5,
          { ...npmEnv, NO_COLOR: '1', FORCE_COLOR: '0' },
        )
        const passed = /Tests\s+(\d+) passed/.exec(output)
        if (!passed) fail(`vitest ${version} ran no conformance case:\n${output}`)
        log(`vitest ${version} ran the shipped store conformance suite: ${passed[1]} cases passed`)
      } catch (error) {
        fail(
          `the shipped conformance suite under vitest ${version}: ${error.stdout}${error.stderr || error.message}`,
        )
      }
    }
  }

  // 9. A project that already has the current Redis client majors installs the tarball without
  //    flags (the peer ranges take them), and the store runs on both when REDIS_URL is set.
  if (specifiers.includes(`${pkg.name}/redis`)) {
    const current = join(work, 'current-redis-clients')
    mkdirSync(current)
    writeFileSync(join(current, 'package.json'), JSON.stringify({ private: true, type: 'module' }))
    const clients = [
      `ioredis@${installedVersion('ioredis6')}`,
      `redis@${installedVersion('redis6')}`,
    ]
    const flags = ['install', '--no-audit', '--no-fund', '--ignore-scripts', '--prefer-offline']
    run('npm', [...flags, ...clients], current)
    try {
      run('npm', [...flags, join(work, packed.filename)], current)
    } catch (error) {
      fail(
        `npm install of the tarball beside ${clients.join(', ')}: ${error.stderr || error.message}`,
      )
    }
    log(`installed the tarball, without flags, into a project that has ${clients.join(', ')}`)
    if (process.env.REDIS_URL) {
      writeFileSync(join(current, 'redis.mjs'), currentRedisClientsFile(pkg.name))
      try {
        log(run(process.execPath, ['redis.mjs'], current).trim())
      } catch (error) {
        fail(`the Redis store on ${clients.join(', ')}: ${error.stderr || error.message}`)
      }
    } else {
      log('skipped running the Redis store on those clients: REDIS_URL is not set')
    }
  }
  // 9b. The same for the current postgres.js major, and the Drizzle store runs on it.
  if (specifiers.includes(`${pkg.name}/drizzle`)) {
    checkCurrentPostgres(
      installedVersion('postgres4'),
      installedVersion('drizzle-orm'),
      join(work, packed.filename),
    )
  }
  // 11. OpenTelemetry: an app that registers the SDK, and does nothing else, sees the keyed
  //     operations in its traces and metrics. With the SDK 2 releases this repository tests
  //     with (on every Node line), and on Node 22.15+ with the current API and the metrics SDK 3.
  checkTelemetry(
    [
      ['@opentelemetry/api', '@opentelemetry/sdk-trace-base', '@opentelemetry/sdk-metrics'].map(
        (name) => `${name}@${installedVersion(name)}`,
      ),
      ...(nodeAtLeast(22, 15) ? [['@opentelemetry/api@1', '@opentelemetry/sdk-metrics@3']] : []),
    ],
    join(work, packed.filename),
  )
  log(`ok: ${present.length} of ${exportsMap.length} subpaths checked`)
} catch (error) {
  if (process.exitCode !== 1) {
    console.error(`[pack:check] FAILED: ${error.stack ?? error}`)
    process.exitCode = 1
  }
} finally {
  if (process.env.KEEP_PACK_CHECK) log(`kept ${work}`)
  else rmSync(work, { recursive: true, force: true })
}

function specifierOf(name) {
  return name === '.' ? pkg.name : `${pkg.name}/${name.slice(2)}`
}

/** Runs tsc on `files` in `folder` with `compilerOptions`; fails the check on any error. */
function typeCheck(folder, label, files, compilerOptions) {
  writeFileSync(join(folder, 'tsconfig.json'), JSON.stringify({ compilerOptions, files }))
  try {
    run(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', folder], folder)
  } catch (error) {
    fail(`tsc (${label}) could not use the declarations:\n${error.stdout || error.message}`)
  }
  log(`tsc: ${label}`)
}

/** SQL with comments, blank lines, `IF NOT EXISTS`, statement breakpoints and spacing folded. */
function normalizeSql(text) {
  return text
    .replace(/--.*$/gm, '')
    .replace(/[`"]/g, '')
    .replaceAll(' IF NOT EXISTS', '')
    .replace(/USING btree /g, '')
    .replace(/\s+/g, ' ')
    .replace(/\s*([(),])\s*/g, '$1')
    .replace(/;\s*/g, ';\n')
    .trim()
}

/** Every factory's options given explicitly as undefined, as exactOptionalPropertyTypes users may. */
function userOptionsFile(name) {
  return `import { createIdempotency, createMemoryStore } from '${name}'
import { createDrizzleStore, idempotencyKeys } from '${name}/drizzle'
import { createRedisStore } from '${name}/redis'
import { createIdempotencyMiddleware } from '${name}/trpc'
import { useIdempotency } from '${name}/envelop'
import { idempotencyLink, idempotentFetch } from '${name}/client'
const maybe = <T>(value: T): T | undefined => (Math.random() > 2 ? value : undefined)
declare const db: Parameters<typeof createDrizzleStore>[0]
declare const redis: Parameters<typeof createRedisStore>[0]
export const stores = [
  createDrizzleStore(db, { table: maybe(idempotencyKeys) }),
  createRedisStore(redis, { prefix: maybe('idem:'), requireReady: maybe(true) }),
]
const idempotency = createIdempotency({
  store: createMemoryStore({ now: maybe(() => 0) }),
  replayCache: maybe({ maxEntries: maybe(10), maxAge: maybe('1m') }),
  ttl: maybe('24h'),
  lockTimeout: maybe('60s'),
  required: maybe(false),
  maxResponseBytes: maybe(1024),
  onEvent: maybe(() => {}),
  now: maybe(() => 0),
  concurrency: maybe('reject'),
})
await idempotency.execute(
  { key: maybe('k'), operation: 'op', scope: maybe('s'), payload: {}, ttl: maybe('1h'), required: maybe(true) },
  async () => 1,
)
export const middleware = createIdempotencyMiddleware<{ user?: string }>({
  idempotency,
  scope: maybe(({ ctx }) => ctx.user),
  getKey: maybe(() => 'k'),
  keyField: maybe('idempotencyKey'),
  required: maybe(true),
  storeErrors: maybe(() => true),
  root: maybe(undefined),
  exposeContext: maybe(false),
})
export const plugin = useIdempotency({
  idempotency,
  scope: maybe(() => 'u'),
  mode: maybe('all'),
  storeErrors: maybe(() => false),
})
const sleep = (ms: number, signal: AbortSignal | undefined) => Promise.resolve(void [ms, signal])
export const link = idempotencyLink({
  maxAttempts: maybe(3),
  retryOn: maybe(() => true),
  sleep: maybe(sleep),
  backoff: maybe({ initialDelay: maybe('100ms') }),
  signal: maybe(AbortSignal.timeout(1000)),
})
export const wrapped = idempotentFetch(fetch, { maxAttempts: maybe(2), generateKey: maybe(() => 'k') })
`
}

/**
 * A Yoga-style app: the engine, the Envelop plugin, the Redis store and the fetch client (not
 * the Drizzle store: drizzle-orm's own declarations do not compile with skipLibCheck off).
 */
function graphqlOnlyFile(name) {
  return `import { createIdempotency, createMemoryStore } from '${name}'
import { useIdempotency, idempotentDirectiveTypeDefs } from '${name}/envelop'
import { idempotentFetch } from '${name}/client/fetch'
import { createRedisStore } from '${name}/redis'
const idempotency = createIdempotency({ store: createMemoryStore() })
export const plugin = useIdempotency({ idempotency, scope: () => 'user-1' })
export const typeDefs: string = idempotentDirectiveTypeDefs
export const client = idempotentFetch(fetch)
export const factories = [createRedisStore]
`
}

/**
 * An Apollo Server 5 app: the plugin on a typed context, the directive, the fields the plugin
 * adds to the context, the standalone server, and the fetch client.
 */
function apolloAppFile(name) {
  return `import { ApolloServer } from '@apollo/server'
import { startStandaloneServer } from '@apollo/server/standalone'
import { createIdempotency, createMemoryStore } from '${name}'
import {
  type IdempotencyContextFields,
  idempotencyPlugin,
  idempotentDirectiveTypeDefs,
} from '${name}/apollo'
import { idempotentFetch } from '${name}/client/fetch'
interface Context {
  user?: { id: string }
}
const maybe = <T>(value: T): T | undefined => (Math.random() > 2 ? value : undefined)
const idempotency = createIdempotency({ store: createMemoryStore() })
export const server = new ApolloServer<Context>({
  typeDefs: [
    idempotentDirectiveTypeDefs,
    'type Query { ok: Boolean } type Mutation { pay: Int @idempotent(required: true) }',
  ],
  resolvers: {
    Mutation: {
      pay: (_: unknown, __: unknown, context: Context & IdempotencyContextFields) =>
        context.idempotency ? 1 : 0,
    },
  },
  plugins: [
    idempotencyPlugin<Context>({
      idempotency,
      scope: (context) => context.user?.id,
      mode: maybe('all'),
      storeErrors: maybe(() => false),
      exposeContext: maybe(true),
    }),
  ],
})
export const start = () => startStandaloneServer(server, { listen: { port: 0 } })
export const client = idempotentFetch(fetch)
`
}

/** Runs one keyed operation, its replay and a reused key on ioredis and on node-redis. */
function currentRedisClientsFile(name) {
  return `import { createIdempotency, KeyReusedError } from '${name}'
import { createRedisStore } from '${name}/redis'
import { Redis } from 'ioredis'
import { createClient } from 'redis'
const io = new Redis(process.env.REDIS_URL, { lazyConnect: true })
await io.connect()
const nodeRedis = await createClient({ url: process.env.REDIS_URL }).connect()
const versions = []
for (const [library, client] of [['ioredis', io], ['redis', nodeRedis]]) {
  const prefix = 'pack-check:' + library + ':' + process.pid + ':' + Date.now() + ':'
  const idempotency = createIdempotency({ store: createRedisStore(client, { prefix }) })
  ${runsOnceLines('library')}
  const { version } = JSON.parse(
    (await import('node:fs')).readFileSync('node_modules/' + library + '/package.json', 'utf8'),
  )
  versions.push(library + ' ' + version)
}
io.disconnect()
await nodeRedis.close()
console.log('the Redis store ran once, replayed and answered KEY_REUSED on ' + versions.join(' and '))
`
}

function installedVersion(name) {
  const manifest = join(root, 'node_modules', name, 'package.json')
  if (!existsSync(manifest)) fail(`the peer ${name} is not installed in this repository`)
  return JSON.parse(readFileSync(manifest, 'utf8')).version
}

function listFiles(folder) {
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? listFiles(join(folder, entry.name)) : [join(folder, entry.name)],
  )
}
