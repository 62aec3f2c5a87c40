import { mkdir, rm, writeFile } from 'node:fs/promises'
import { afterAll, describe, expect, it } from 'vitest'
import { documentationPages } from './pages'

// Every ```ts runnable block of README.md and of the pages under docs/ runs here, as its own
// module, with the package's subpaths resolved to source (vitest.config.ts): a block that
// throws, or whose `assert`s fail, fails the test named after its page and the heading it sits
// under.
interface Block {
  page: string
  heading: string
  code: string
}

function runnableBlocks(page: string, text: string): Block[] {
  const blocks: Block[] = []
  let heading = page
  let fence: string | undefined
  let runnable: string[] | undefined
  for (const line of text.split('\n')) {
    if (fence !== undefined) {
      if (line.trim() === fence) {
        if (runnable) blocks.push({ page, heading, code: `${runnable.join('\n')}\n` })
        fence = undefined
        runnable = undefined
      } else runnable?.push(line)
      continue
    }
    const opening = /^(```+|~~~+)\s*(\S*)(.*)$/.exec(line.trim())
    if (opening) {
      fence = opening[1]!
      if (opening[2] === 'ts' && /\brunnable\b/.test(opening[3]!)) runnable = []
      continue
    }
    const title = /^#{1,6}\s+(.+?)\s*$/.exec(line)
    if (title) heading = title[1]!
  }
  return blocks
}

const blocks = documentationPages().flatMap(({ path, text }) => runnableBlocks(path, text))
const folder = new URL('./.generated/', import.meta.url)
// A block that starts PGlite (WebAssembly) can take half a minute on a busy 2-core machine.
const blockTimeout = 120_000

afterAll(async () => {
  await rm(folder, { recursive: true, force: true })
})

describe('documentation code blocks marked runnable', () => {
  it('there are runnable blocks to check, in the README and under docs/', () => {
    expect(blocks.filter((block) => block.page === 'README.md').length).toBeGreaterThanOrEqual(2)
    expect(blocks.filter((block) => block.page.startsWith('docs/')).length).toBeGreaterThan(0)
  })

  it.each(
    blocks.map(
      (block, index) =>
        [
          `block ${index + 1}, in ${block.page} under "${block.heading}", runs`,
          block.code,
          index,
        ] as const,
    ),
  )(
    '%s',
    async (_name, code, index) => {
      await mkdir(folder, { recursive: true })
      const file = new URL(`block-${index}.ts`, folder)
      await writeFile(file, code)
      await expect(import(/* @vite-ignore */ file.href)).resolves.toBeDefined()
    },
    blockTimeout,
  )
})
