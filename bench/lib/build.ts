/**
 * Builds the package the way `npm run build` does (tsup, the repository's tsup.config.ts) into a
 * scratch folder, and loads it from there. The bench measures that build, not the TypeScript
 * sources: `tsx` compiles sources with esbuild's `keepNames`, which wraps every function the
 * engine creates per call in a `__name()` call that the shipped package does not have.
 */
import { execFileSync } from 'node:child_process'
import { rm, symlink } from 'node:fs/promises'
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

/**
 * Inside node_modules so a build's bare imports (superjson, drizzle-orm, ...) resolve against the
 * project's own dependencies; per process (and per copy) so parallel runs never meet.
 */
function scratch(name: string): string {
  return join(root, 'node_modules', '.cache', 'idempotent-mutations-bench', `${process.pid}${name}`)
}

/** Builds the working tree; `copy` names a second, separately loaded copy (an A/A control). */
export async function buildLibrary(copy = ''): Promise<BuiltLibrary> {
  const directory = scratch(copy)
  await build({
    config: join(root, 'tsup.config.ts'),
    outDir: directory,
    dts: false,
    sourcemap: false,
    silent: true,
  })
  return loadBuild(directory)
}

/**
 * Builds the package as it was at git `revision` (checked out in a worktree of its own, built by
 * that revision's tsup config) to measure a change against it in the same run.
 */
export async function buildRevision(revision: string): Promise<BuiltLibrary> {
  const directory = scratch(`-${revision}`)
  const tree = `${directory}-tree`
  const git = (...args: string[]) =>
    execFileSync('git', args, { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] })
  await rm(tree, { recursive: true, force: true })
  git('worktree', 'prune')
  git('worktree', 'add', '--detach', tree, revision)
  try {
    await symlink(join(root, 'node_modules'), join(tree, 'node_modules'))
    execFileSync(
      process.execPath,
      [join(root, 'node_modules', 'tsup', 'dist', 'cli-default.js'), '--out-dir', directory],
      { cwd: tree, stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, NODE_ENV: '' } },
    )
  } finally {
    git('worktree', 'remove', '--force', tree)
  }
  return loadBuild(directory)
}

export async function loadBuild(directory: string): Promise<BuiltLibrary> {
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
