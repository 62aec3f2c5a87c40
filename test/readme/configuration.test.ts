import { readFile } from 'node:fs/promises'
import { describe, expect, it } from 'vitest'

// The README's configuration table and the engine's option docs must tell the same story: every
// option of IdempotencyOptions has a row, and the row's default is the `@default` of the code.
const source = await readFile(new URL('../../src/engine.ts', import.meta.url), 'utf8')
const readme = await readFile(new URL('../../README.md', import.meta.url), 'utf8')

const body = /export interface IdempotencyOptions[^{]*\{([\s\S]*?)\n\}/.exec(source)?.[1] ?? ''
const options = [...body.matchAll(/\/\*\*([\s\S]*?)\*\/\s*(\w+)\??:/g)].map(([, doc, name]) => ({
  name: name!,
  // The first word of `@default …`: a value such as '24h', false, 1048576 or Date.now.
  default: /@default\s+(\S+)/.exec(doc!)?.[1],
}))
const table = readme.slice(readme.indexOf('## Configuration'), readme.indexOf('## Stores'))
const rows = new Map(
  [...table.matchAll(/^\| `(\w+)` \| (.*?) \|/gm)].map(([, name, value]) => [name!, value!]),
)

describe('the README configuration table', () => {
  it('documents the engine options found in src/engine.ts', () => {
    expect(options.length).toBeGreaterThanOrEqual(15)
  })

  it.each(options.filter((option) => option.name !== 'store'))(
    'lists `$name` with the default the code documents ($default)',
    ({ name, default: value }) => {
      expect(rows.has(name), `no row for ${name}`).toBe(true)
      const cell = rows.get(name)!
      const expected = value === 'undefined' ? 'none' : value!
      expect(cell).toContain(expected)
    },
  )
})
