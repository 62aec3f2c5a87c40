import { readdirSync, readFileSync } from 'node:fs'

/** The repository's root folder. */
export const root = new URL('../../', import.meta.url)

/** The repository's address on GitHub: README.md links into the repository through it. */
export const repositoryUrl = 'https://github.com/idempotent-mutations/idempotent-mutations'

export interface Page {
  /** The page's path from the repository root: `README.md`, `docs/stores.md`. */
  path: string
  text: string
}

/** The user-facing documentation: README.md, every page under docs/, and CHANGELOG.md. */
export function documentationPages(): Page[] {
  const docs = readdirSync(new URL('docs/', root))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`)
  return ['README.md', ...docs, 'CHANGELOG.md'].map((path) => ({
    path,
    text: readFileSync(new URL(path, root), 'utf8'),
  }))
}

/**
 * The page's prose: fenced code blocks (```` ``` ```` or `~~~`) replaced by empty lines, so a `#`
 * or a `[a](b)` inside code is neither a heading nor a link. Line numbers are kept.
 */
export function withoutCodeBlocks(text: string): string {
  let fence: string | undefined
  return text
    .split('\n')
    .map((line) => {
      const marker = /^\s*(```+|~~~+)/.exec(line)?.[1]
      if (fence === undefined && marker) {
        fence = marker
        return ''
      }
      if (fence !== undefined) {
        if (marker?.startsWith(fence) && line.trim() === marker) fence = undefined
        return ''
      }
      return line
    })
    .join('\n')
}

/** Inline code spans blanked out (`` `a [b](c)` `` is not a link). */
export function withoutInlineCode(text: string): string {
  return text.replace(/(`+)[^`]*?\1/g, (span) => ' '.repeat(span.length))
}

/**
 * The anchors GitHub makes of a page's headings: lower case, punctuation dropped (what is not a
 * letter, mark, number, `_`, `-` or space), spaces to hyphens, `-1`, `-2`… after repeats.
 */
export function anchorsOf(text: string): Set<string> {
  const anchors = new Set<string>()
  const seen = new Map<string, number>()
  for (const [, heading] of withoutCodeBlocks(text).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const plain = heading!
      .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // a link's text
      .replace(/<[^>]+>/g, '') // inline HTML
    const slug = plain
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '')
      .replace(/ /g, '-')
    const count = seen.get(slug) ?? 0
    seen.set(slug, count + 1)
    anchors.add(count === 0 ? slug : `${slug}-${count}`)
  }
  return anchors
}

export interface Link {
  target: string
  line: number
}

/** The targets of a page's Markdown links (inline and reference definitions), outside code. */
export function linksOf(text: string): Link[] {
  const prose = withoutInlineCode(withoutCodeBlocks(text))
  const links: Link[] = []
  const lines = prose.split('\n')
  lines.forEach((line, index) => {
    for (const match of line.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      links.push({ target: match[1]!, line: index + 1 })
    }
    const definition = /^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s+"[^"]*")?\s*$/.exec(line)
    if (definition) links.push({ target: definition[1]!, line: index + 1 })
  })
  return links
}
