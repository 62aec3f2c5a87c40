import { readFile } from 'node:fs/promises'
import { describe, expect, it } from 'vitest'
import {
  defaultCodec,
  defaultIdempotencyOptions,
  defaultLogger,
  defaultStoreErrors,
} from '../../src'

// The README's configuration table, the engine's option docs and the defaults the engine applies
// must tell the same story: every option of IdempotencyOptions has a row and a default in
// `defaultIdempotencyOptions`, and the row, the `@default` and that value agree.
const source = await readFile(new URL('../../src/engine/options.ts', import.meta.url), 'utf8')
const readme = await readFile(new URL('../../README.md', import.meta.url), 'utf8')

const body = /export interface IdempotencyOptions[^{]*\{([\s\S]*?)\n\}/.exec(source)?.[1] ?? ''
const options = [...body.matchAll(/\/\*\*([\s\S]*?)\*\/\s*(\w+)\??:/g)].map(([, doc, name]) => ({
  name: name!,
  // The first word of `@default …`: a value such as '24h', false, 1048576 or Date.now.
  default: /@default\s+(\S+)/.exec(doc!)?.[1],
  // The whole value: an object literal, or that first word.
  value: /@default\s+(\{[^}]*\}|\S+)/.exec(doc!)?.[1],
}))
const table = readme.slice(readme.indexOf('## Configuration'), readme.indexOf('## Stores'))
const rows = new Map(
  [...table.matchAll(/^\| `(\w+)` \| (.*?) \|/gm)].map(([, name, value]) => [name!, value!]),
)

/** A default as the docs write it: a string quoted, an exported value by its name. */
const names = new Map<unknown, string>([
  [defaultStoreErrors, 'defaultStoreErrors'],
  [defaultCodec, 'defaultCodec'],
  [defaultLogger, 'defaultLogger'],
  [Date.now, 'Date.now'],
])
function written(value: unknown): string {
  const name = names.get(value)
  if (name !== undefined) return name
  if (typeof value === 'string') return `'${value}'`
  if (value !== null && typeof value === 'object') {
    const fields = Object.entries(value).map(([field, inner]) => `${field}: ${written(inner)}`)
    return `{ ${fields.join(', ')} }`
  }
  return String(value)
}
const defaults = defaultIdempotencyOptions as Record<string, unknown>

describe('the README configuration table', () => {
  it('documents the engine options found in src/engine/options.ts', () => {
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

describe('defaultIdempotencyOptions', () => {
  it('has a default for every option but store, and no other', () => {
    const documented = options.map((option) => option.name).filter((name) => name !== 'store')
    expect(Object.keys(defaults).sort()).toEqual(documented.sort())
  })

  it.each(options.filter((option) => option.name !== 'store'))(
    'holds the `@default` of `$name` ($value), and the README shows it',
    ({ name, value }) => {
      const actual = written(defaults[name])
      expect(actual).toBe(value)
      expect(rows.get(name)).toContain(actual === 'undefined' ? 'none' : actual)
    },
  )
})
