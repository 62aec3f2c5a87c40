import { mkdir, readFile, rm, writeFile } from 'node:fs/promises'
import { afterAll, describe, expect, it } from 'vitest'

// Every ```ts runnable block of the README runs here, as its own module, with the package's
// subpaths resolved to source (vitest.config.ts): a block that throws, or whose `assert`s fail,
// fails the test named after the heading it sits under.
const readme = await readFile(new URL('../../README.md', import.meta.url), 'utf8')
const blocks: { heading: string; code: string }[] = []
let heading = 'README'
for (const match of readme.matchAll(/^(#{1,4} .*)$|^```ts runnable\n([\s\S]*?)^```$/gm)) {
  if (match[1]) heading = match[1].replace(/^#+ /, '')
  else blocks.push({ heading, code: match[2]! })
}
const folder = new URL('./.generated/', import.meta.url)

afterAll(async () => {
  await rm(folder, { recursive: true, force: true })
})

describe('README code blocks marked runnable', () => {
  it('there are runnable blocks to check', () => {
    expect(blocks.length).toBeGreaterThanOrEqual(3)
  })

  it.each(
    blocks.map(
      (block, index) =>
        [`block ${index + 1}, under "${block.heading}", runs`, block.code, index] as const,
    ),
  )('%s', async (_name, code, index) => {
    await mkdir(folder, { recursive: true })
    const file = new URL(`block-${index}.ts`, folder)
    await writeFile(file, code)
    await expect(import(/* @vite-ignore */ file.href)).resolves.toBeDefined()
  })
})
