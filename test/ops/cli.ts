import { execFile } from 'node:child_process'
import { rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('../../', import.meta.url))
const blocker = fileURLToPath(new URL('./block-packages.mjs', import.meta.url))
// Inside the repository, so the built file finds the packages in its node_modules.
const outDir = `${root}.cli-test-${process.pid}`

let built: Promise<string> | undefined

/**
 * The CLI built from source with the package's tsup settings (drivers and drizzle left as
 * imports), once per test process: a child process on plain Node starts in a fraction of the
 * time one that compiles TypeScript on load takes.
 */
function builtCli(): Promise<string> {
  built ??= (async () => {
    const { build } = createRequire(import.meta.url)('tsup') as typeof import('tsup')
    await build({
      config: false,
      entry: { index: `${root}cli/index.ts` },
      outDir,
      format: ['esm'],
      target: 'node20',
      platform: 'node',
      skipNodeModulesBundle: true,
      silent: true,
    })
    return `${outDir}/index.js`
  })()
  return built
}

/** Removes the built CLI (call from afterAll). */
export function removeBuiltCli(): void {
  rmSync(outDir, { recursive: true, force: true })
}

export interface CliRun {
  code: number
  stdout: string
  stderr: string
}

/** Where a run of the CLI finds its store: the variables it gets (none of the test's own). */
export type CliEnvironment = { DATABASE_URL?: string; REDIS_URL?: string }

/**
 * Runs the CLI as a child process with `args` and only the store variables of `env`; the
 * `blocked` packages cannot be loaded in it, as if they were not installed.
 */
export async function runCli(
  args: string[],
  env: CliEnvironment,
  blocked: string[] = [],
): Promise<CliRun> {
  const cli = await builtCli()
  const { DATABASE_URL: _, REDIS_URL: __, ...rest } = process.env
  return new Promise<CliRun>((resolve) => {
    execFile(
      process.execPath,
      ['--import', blocker, cli, ...args],
      { env: { ...rest, ...env, CLI_TEST_BLOCKED: JSON.stringify(blocked) } },
      (error, stdout, stderr) => {
        const code = error ? Number((error as { code?: unknown }).code ?? 1) : 0
        resolve({ code, stdout, stderr })
      },
    )
  })
}

/** The JSON a `--json` run printed. */
export function jsonOf(run: CliRun): Record<string, unknown> & {
  record?: Record<string, unknown>
} {
  try {
    return JSON.parse(run.stdout)
  } catch {
    throw new Error(`the CLI printed no JSON (exit ${run.code}):\n${run.stdout}\n${run.stderr}`)
  }
}
