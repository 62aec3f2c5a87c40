import { existsSync, readFileSync, statSync } from 'node:fs'
import { posix } from 'node:path'
import { describe, expect, it } from 'vitest'
import { anchorsOf, documentationPages, type Link, linksOf, repositoryUrl, root } from './pages'

// The links of the documentation, and its words.
//
// README.md is also the package's page on npm, where a relative link does not resolve (and
// docs/ is not in the tarball): it links into the repository by absolute GitHub URL, on the
// main branch. The pages under docs/ (and CHANGELOG.md) are read on GitHub and link to each
// other, and to the repository's files, relatively. Either way the target file must exist here and, for a
// Markdown page with a #fragment, have that heading.
const pages = documentationPages()
const inRepository = new RegExp(`^${repositoryUrl}/(?:blob|tree)/main/([^#?]*)(#.*)?$`)

/** Words that belong to the project's work history, not to its documentation. */
const refused: { pattern: RegExp; why: string }[] = [
  { pattern: /\bsessions?\b/i, why: 'a work session (say what the code does now)' },
  { pattern: /\bSPEC\b/, why: 'a contract file users do not have (the docs are the contract)' },
  { pattern: /\bthis round\b/i, why: 'a work round' },
  { pattern: /\btried and dropped\b/i, why: 'history of attempts' },
]

/** The file a link points to, from the repository root, and its fragment; undefined for other sites. */
function resolve(
  page: string,
  link: Link,
): { file: string; fragment?: string; absolute: boolean } | undefined {
  const { target } = link
  const absolute = inRepository.exec(target)
  if (absolute) {
    return {
      file: decodeURIComponent(absolute[1]!).replace(/\/$/, '') || '.',
      fragment: absolute[2]?.slice(1),
      absolute: true,
    }
  }
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return undefined // https:, mailto:, …
  const [path, fragment] = target.split('#') as [string, string | undefined]
  const file =
    path === '' ? page : posix.normalize(posix.join(posix.dirname(page), decodeURIComponent(path)))
  return { file, fragment, absolute: false }
}

const anchors = new Map<string, Set<string>>()
function anchorsOfFile(file: string): Set<string> {
  let found = anchors.get(file)
  if (!found) {
    found = anchorsOf(readFileSync(new URL(file, root), 'utf8'))
    anchors.set(file, found)
  }
  return found
}

describe.each(pages.map((page) => [page.path, page] as const))('%s', (path, page) => {
  const links = linksOf(page.text)

  it('links only to files that exist, and to headings those pages have', () => {
    const broken: string[] = []
    for (const link of links) {
      const target = resolve(path, link)
      if (!target) continue
      const where = `${path}:${link.line} ${link.target}`
      if (target.file.startsWith('..') || !existsSync(new URL(target.file, root))) {
        broken.push(`${where}: no file ${target.file}`)
        continue
      }
      if (target.fragment === undefined || target.fragment === '') continue
      if (!target.file.endsWith('.md') || statSync(new URL(target.file, root)).isDirectory()) {
        continue // a line anchor in a source file (#L10) is GitHub's, not checked here
      }
      if (!anchorsOfFile(target.file).has(decodeURIComponent(target.fragment))) {
        broken.push(`${where}: ${target.file} has no heading #${target.fragment}`)
      }
    }
    expect(broken).toEqual([])
  })

  if (path === 'README.md') {
    it('links into the repository by absolute GitHub URL (it is also the npm page)', () => {
      const relative = links.filter((link) => {
        const target = resolve(path, link)
        return target !== undefined && !target.absolute && target.file !== path
      })
      expect(relative.map((link) => `${path}:${link.line} ${link.target}`)).toEqual([])
    })
  } else {
    it('links to the repository relatively (it is read on GitHub, next to its targets)', () => {
      const absolute = links.filter((link) => resolve(path, link)?.absolute)
      expect(absolute.map((link) => `${path}:${link.line} ${link.target}`)).toEqual([])
    })
  }

  it('speaks of what the library does, not of the history of its making', () => {
    const found = page.text
      .split('\n')
      .flatMap((line, index) =>
        refused
          .filter(({ pattern }) => pattern.test(line))
          .map(({ pattern, why }) => `${path}:${index + 1} ${pattern}: ${why}: ${line.trim()}`),
      )
    expect(found).toEqual([])
  })
})

describe('the published package', () => {
  it('does not ship docs/, so the README links to it on GitHub', () => {
    const pkg = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as {
      files: string[]
    }
    expect(pkg.files.some((file) => file === 'docs' || file.startsWith('docs/'))).toBe(false)
    expect(pkg.files).toContain('README.md')
  })
})
