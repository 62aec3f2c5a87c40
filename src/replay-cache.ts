import { type Duration, toMilliseconds } from './duration'

/**
 * The engine's copies of completed records (its `replayCache` option). A completed record
 * cannot change before it expires: claim, complete, release and sweep all leave it alone. So a
 * retry answered from a copy gets exactly what the store would answer, without the round trip,
 * for as long as the copy cannot outlive the record. The one exception is on purpose: an
 * operator's `releaseKey` (or a DELETE by hand) removes a completed record, and a process that
 * copied it goes on replaying its copy for up to `maxAge` (docs/operating.md says so).
 */
export interface ReplayCacheOptions {
  /** Copies kept at most; the least recently used goes first. @default 1000 */
  maxEntries?: number | undefined
  /**
   * Stored responses kept at most, in characters of their stored text (about bytes for ASCII
   * JSON); a larger response is not copied. @default 8388608 (8 Mi)
   */
  maxCharacters?: number | undefined
  /**
   * How long a copy is used at most, however long its record lives. A record deleted by hand
   * keeps being replayed by processes that copied it for up to this long. @default '1m'
   */
  maxAge?: Duration | undefined
}

/** What a copy holds: enough to answer a retry as the record would (replay or 422). */
export interface ReplayCopy {
  readonly status: 'completed'
  readonly fingerprint: string
  readonly response: string | null
}

interface Entry extends ReplayCopy {
  /** On the engine's clock: when the copy stops being used. */
  readonly until: number
  readonly size: number
}

/** The `replayCache` settings an engine uses when it is given none. */
export const defaultReplayCacheOptions = {
  maxEntries: 1000,
  maxCharacters: 8 * 1024 * 1024,
  maxAge: '1m',
} as const

function positiveInteger(value: number, option: string): number {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new TypeError(
      `idempotent-mutations: replayCache.${option} must be a positive integer (got ${JSON.stringify(value)})`,
    )
  }
  return value
}

export class ReplayCache {
  // Map order is use order (a hit moves its entry to the end), so the first entry is the least
  // recently used, the one to evict.
  readonly #entries = new Map<string, Entry>()
  readonly #maxEntries: number
  readonly #maxCharacters: number
  readonly #maxAgeMs: number
  #characters = 0

  constructor(options: ReplayCacheOptions) {
    this.#maxEntries = positiveInteger(
      options.maxEntries ?? defaultReplayCacheOptions.maxEntries,
      'maxEntries',
    )
    this.#maxCharacters = positiveInteger(
      options.maxCharacters ?? defaultReplayCacheOptions.maxCharacters,
      'maxCharacters',
    )
    this.#maxAgeMs = toMilliseconds(
      options.maxAge ?? defaultReplayCacheOptions.maxAge,
      'replayCache.maxAge',
    )
  }

  /** The copy of (scope, key) that is still good at `now`, if any. */
  get(scope: string, key: string, now: number): ReplayCopy | undefined {
    const id = entryId(scope, key)
    const entry = this.#entries.get(id)
    if (entry === undefined) return undefined
    this.#entries.delete(id)
    if (now < entry.until) {
      this.#entries.set(id, entry)
      return entry
    }
    this.#characters -= entry.size
    return undefined
  }

  /**
   * Copies a completed record that has at least `liveMs` left to live as of `from` on the
   * engine's clock. `from` must be a time no later than the store's reading of its own clock
   * (taken before the store was asked), so the copy never outlives the record.
   */
  add(
    scope: string,
    key: string,
    fingerprint: string,
    response: string | null,
    from: number,
    liveMs: number,
  ): void {
    const lifetime = Math.min(liveMs, this.#maxAgeMs)
    const size = response === null ? 0 : response.length
    if (!(lifetime > 0) || size > this.#maxCharacters) return
    const id = entryId(scope, key)
    const existing = this.#entries.get(id)
    if (existing !== undefined) this.#remove(id, existing)
    const entry: Entry = {
      status: 'completed',
      fingerprint,
      response,
      until: from + lifetime,
      size,
    }
    this.#entries.set(id, entry)
    this.#characters += size
    while (this.#entries.size > this.#maxEntries || this.#characters > this.#maxCharacters) {
      const [oldestId, oldest] = this.#entries.entries().next().value as [string, Entry]
      this.#remove(oldestId, oldest)
    }
  }

  /** How many copies are kept (for tests and diagnostics). */
  get size(): number {
    return this.#entries.size
  }

  #remove(id: string, entry: Entry): void {
    this.#entries.delete(id)
    this.#characters -= entry.size
  }
}

// A stored scope is JSON, which never holds a raw NUL, so the pair cannot be read two ways.
const entryId = (scope: string, key: string) => `${scope}\u0000${key}`
