import ms from 'ms'

/** Milliseconds, or a number with a unit: `'300ms'`, `'90s'`, `'5m'`, `'24h'`, `'7d'`. */
export type Duration = number | `${number}${'ms' | 's' | 'm' | 'h' | 'd'}`

const durationPattern = /^\d+(?:\.\d+)?(?:ms|s|m|h|d)$/

// Per-operation durations (tRPC meta `ttl: '1h'`) arrive as the same few strings on every call.
const parsedDurations = new Map<string, number>()

/** Parses a {@link Duration} into milliseconds; throws a TypeError naming the option on bad input. */
export function toMilliseconds(value: Duration | string, option = 'duration'): number {
  if (typeof value === 'number') {
    if (Number.isFinite(value) && value >= 0) return value
  } else if (typeof value === 'string') {
    const known = parsedDurations.get(value)
    if (known !== undefined) return known
    const parsed = durationPattern.test(value) ? ms(value as Parameters<typeof ms>[0]) : Number.NaN
    if (Number.isFinite(parsed)) {
      if (parsedDurations.size < 256) parsedDurations.set(value, parsed)
      return parsed
    }
  }
  throw new TypeError(
    `idempotent-mutations: ${option} must be a non-negative number of milliseconds or a string like '300ms', '90s', '5m', '24h', '7d' (got ${JSON.stringify(value)})`,
  )
}
