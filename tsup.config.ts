import { defineConfig } from 'tsup'

export default defineConfig({
  entry: {
    'src/index': 'src/index.ts',
    'src/stores/drizzle/index': 'src/stores/drizzle/index.ts',
    'src/stores/redis/index': 'src/stores/redis/index.ts',
    'adapters/trpc/index': 'adapters/trpc/index.ts',
    'adapters/envelop/index': 'adapters/envelop/index.ts',
    'adapters/apollo/index': 'adapters/apollo/index.ts',
    'adapters/client/index': 'adapters/client/index.ts',
    'adapters/client/fetch': 'adapters/client/fetch.ts',
    'adapters/client/trpc': 'adapters/client/trpc.ts',
    'src/testing/index': 'src/testing/index.ts',
    'adapters/fetch/index': 'adapters/fetch/index.ts',
    'adapters/hono/index': 'adapters/hono/index.ts',
    'adapters/express/index': 'adapters/express/index.ts',
    'cli/index': 'cli/index.ts',
  },
  format: ['esm'],
  target: 'node20',
  dts: true,
  splitting: true,
  clean: true,
  sourcemap: true,
  treeshake: true,
})
