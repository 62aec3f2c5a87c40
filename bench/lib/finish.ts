/** The end of a bench run: its targets on the console, and its results files unless quick. */
import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { Target } from './report'

export async function finishRun(run: {
  /** The results files' name: `latest` writes latest.json and latest.md. */
  name: string
  results: { durationSeconds: number; targets: Target[] }
  markdown: string
  quick: boolean
  log: (line: string) => void
}): Promise<void> {
  const { name, results, log } = run
  log(`done in ${results.durationSeconds} s`)
  for (const target of results.targets) {
    log(
      `  ${target.met ? 'met   ' : 'MISSED'} ${target.name}: ${target.measured} (${target.target})`,
    )
  }
  if (run.quick) {
    log('quick mode: no results written')
    return
  }
  const directory = join(import.meta.dirname, '..', 'results')
  await mkdir(directory, { recursive: true })
  await writeFile(join(directory, `${name}.json`), `${JSON.stringify(results, null, 2)}\n`)
  await writeFile(join(directory, `${name}.md`), run.markdown)
  log(`wrote ${join('bench', 'results', `${name}.json`)} and ${name}.md`)
}
