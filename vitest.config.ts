import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vitest/config'

const require = createRequire(import.meta.url)

const packageSubpaths = {
  'idempotent-mutations': './src/index.ts',
  'idempotent-mutations/drizzle': './src/stores/drizzle/index.ts',
  'idempotent-mutations/redis': './src/stores/redis/index.ts',
  'idempotent-mutations/trpc': './adapters/trpc/index.ts',
  'idempotent-mutations/envelop': './adapters/envelop/index.ts',
  'idempotent-mutations/apollo': './adapters/apollo/index.ts',
  'idempotent-mutations/client': './adapters/client/index.ts',
  'idempotent-mutations/client/fetch': './adapters/client/fetch.ts',
  'idempotent-mutations/client/trpc': './adapters/client/trpc.ts',
  'idempotent-mutations/testing': './src/testing/index.ts',
  'idempotent-mutations/fetch': './adapters/fetch/index.ts',
  'idempotent-mutations/hono': './adapters/hono/index.ts',
  'idempotent-mutations/express': './adapters/express/index.ts',
}

export default defineConfig({
  resolve: {
    // graphql@16 ships CJS (main) and ESM (module) builds. Node loads the CJS one for Yoga and
    // Apollo Server, so tests must too: two copies of GraphQLError make Yoga mask errors thrown
    // on purpose.
    alias: [
      { find: /^graphql$/, replacement: require.resolve('graphql') },
      // Examples and README snippets import the package by name, as users do.
      ...Object.entries(packageSubpaths).map(([name, file]) => ({
        find: new RegExp(`^${name}$`),
        replacement: fileURLToPath(new URL(file, import.meta.url)),
      })),
    ],
  },
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // .ci/run adds a JSON reporter per leg on the command line, to check which suites ran.
    reporters: ['default'],
  },
})
