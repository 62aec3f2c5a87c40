/**
 * Builds the package the way `npm run build` does (tsup, the repository's tsup.config.ts) into a
 * scratch folder, and loads it from there. The bench measures that build, not the TypeScript
 * sources: `tsx` compiles sources with esbuild's `keepNames`, which wraps every function the
 * engine creates per call in a `__name()` call that the shipped package does not have.
 */
import { rm } from 'node:fs/promises'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { build } from 'tsup'

const root = join(import.meta.dirname, '..', '..')

/** The package's runtime, typed from its sources. */
export interface Library {
  core: typeof import('../../src')
  drizzle: typeof import('../../src/stores/drizzle')
  redis: typeof import('../../src/stores/redis')
  trpc: typeof import('../../adapters/trpc')
  envelop: typeof import('../../adapters/envelop')
}

export interface BuiltLibrary extends Library {
  /** Where the build was written, removed by `dispose`. */
  directory: string
  dispose(): Promise<void>
}

export async function buildLibrary(): Promise<BuiltLibrary> {
  // Inside node_modules so the build's bare imports (superjson, drizzle-orm, ...) resolve
  // against the project's own dependencies; per process so parallel runs never meet.
  const directory = join(
    root,
    'node_modules',
    '.cache',
    'idempotent-mutations-bench',
    String(process.pid),
  )
  await build({
    config: join(root, 'tsup.config.ts'),
    outDir: directory,
    dts: false,
    sourcemap: false,
    silent: true,
  })
  const load = (entry: string) => import(pathToFileURL(join(directory, `${entry}.js`)).href)
  return {
    directory,
    core: await load('src/index'),
    drizzle: await load('src/stores/drizzle/index'),
    redis: await load('src/stores/redis/index'),
    trpc: await load('adapters/trpc/index'),
    envelop: await load('adapters/envelop/index'),
    dispose: () => rm(directory, { recursive: true, force: true }),
  }
}

/** The sources themselves, as tsx compiles them (for `--source`). */
export async function loadSources(): Promise<BuiltLibrary> {
  return {
    directory: root,
    core: await import('../../src'),
    drizzle: await import('../../src/stores/drizzle'),
    redis: await import('../../src/stores/redis'),
    trpc: await import('../../adapters/trpc'),
    envelop: await import('../../adapters/envelop'),
    dispose: async () => {},
  }
}
