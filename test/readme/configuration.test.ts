import { readFile } from 'node:fs/promises'
import { describe, expect, it } from 'vitest'
import {
  defaultCodec,
  defaultIdempotencyOptions,
  defaultLogger,
  defaultStoreErrors,
} from '../../src'
import { documentationPages } from './pages'

/** The file that declares `IdempotencyOptions`, whose `@default`s the table must show. */
const ENGINE_OPTIONS_SOURCE = 'src/engine/options.ts'
/** The heading the engine options table sits under, on whichever page holds it. */
const TABLE_HEADING = '## Engine options'

// The documented engine options table, the engine's option docs and the defaults the engine
// applies must tell the same story: every option of IdempotencyOptions has a row and a default
// in `defaultIdempotencyOptions`, the row, the `@default` and that value agree, and the table
// has no row for an option the code does not have.
const source = await readFile(new URL(`../../${ENGINE_OPTIONS_SOURCE}`, import.meta.url), 'utf8')

const body = /export interface IdempotencyOptions[^{]*\{([\s\S]*?)\n\}/.exec(source)?.[1] ?? ''
const options = [...body.matchAll(/\/\*\*([\s\S]*?)\*\/\s*(\w+)\??:/g)].map(([, doc, name]) => ({
  name: name!,
  // The first word of `@default …`: a value such as '24h', false, 1048576 or Date.now.
  default: /@default\s+(\S+)/.exec(doc!)?.[1],
  // The whole value: an object literal, or that first word.
  value: /@default\s+(\{[^}]*\}|\S+)/.exec(doc!)?.[1],
}))

const pages = documentationPages().filter(({ text }) =>
  text.split('\n').some((line) => line.trim() === TABLE_HEADING),
)
const page = pages[0]
const section = (() => {
  if (!page) return ''
  const lines = page.text.split('\n')
  const start = lines.findIndex((line) => line.trim() === TABLE_HEADING)
  const end = lines.findIndex((line, index) => index > start && /^#{1,2} /.test(line))
  return lines.slice(start, end === -1 ? undefined : end).join('\n')
})()
const rows = new Map(
  [...section.matchAll(/^\| `(\w+)` \| (.*?) \|/gm)].map(([, name, value]) => [name!, value!]),
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

describe(`the engine options table (${page?.path ?? 'not found'})`, () => {
  it(`is on exactly one documentation page, under "${TABLE_HEADING}"`, () => {
    expect(pages.map(({ path }) => path)).toHaveLength(1)
  })

  it(`documents the engine options found in ${ENGINE_OPTIONS_SOURCE}`, () => {
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

  it('lists no option the code does not have', () => {
    const known = new Set(options.map((option) => option.name))
    expect([...rows.keys()].filter((name) => !known.has(name))).toEqual([])
  })
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
