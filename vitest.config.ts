import { createRequire } from 'node:module'
import { defineConfig } from 'vitest/config'

const require = createRequire(import.meta.url)

export default defineConfig({
  resolve: {
    // graphql@16 ships CJS (main) and ESM (module) builds. Node loads the CJS one for Yoga, so
    // tests must too: two copies of GraphQLError make Yoga mask errors thrown on purpose.
    alias: [{ find: /^graphql$/, replacement: require.resolve('graphql') }],
  },
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // On CI, a JSON report lets .ci/run check that the real-Postgres suites ran.
    reporters: process.env.CI
      ? ['default', ['json', { outputFile: '.ci/test-results.json' }]]
      : ['default'],
  },
})
