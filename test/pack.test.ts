import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const script = fileURLToPath(new URL('../scripts/check-pack.mjs', import.meta.url))
// Building the declarations, packing, installing and six drizzle-kit runs took 7 minutes on a
// busy 2-core machine.
const timeout = 600_000

function runPackCheck(): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [script],
      { maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const code = error ? Number((error as { code?: unknown }).code ?? 1) : 0
        resolve({ code, output: `${stdout}${stderr}` })
      },
    )
  })
}

describe('the published package', () => {
  it(
    'builds, packs and installs, and every subpath imports with plain Node and resolves its types',
    async () => {
      const { code, output } = await runPackCheck()
      expect(output, output).toMatch(/\[pack:check\] ok: \d+ of \d+ subpaths checked/)
      // drizzle-kit generated each dialect's exported table from the tarball, as shipped.
      expect(output, output).toMatch(
        /drizzle-kit generate loaded each dialect's table .*: schema\.sql, schema\.mysql\.sql, schema\.sqlite\.sql/,
      )
      expect(code, output).toBe(0)
    },
    timeout,
  )
})
