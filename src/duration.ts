import ms from 'ms'

/** Milliseconds, or a number with a unit: `'300ms'`, `'90s'`, `'5m'`, `'24h'`, `'7d'`. */
export type Duration = number | `${number}${'ms' | 's' | 'm' | 'h' | 'd'}`

const durationPattern = /^\d+(?:\.\d+)?(?:ms|s|m|h|d)$/

/** Parses a {@link Duration} into milliseconds; throws a TypeError naming the option on bad input. */
export function toMilliseconds(value: Duration | string, option = 'duration'): number {
  if (typeof value === 'number') {
    if (Number.isFinite(value) && value >= 0) return value
  } else if (typeof value === 'string' && durationPattern.test(value)) {
    const parsed = ms(value as Parameters<typeof ms>[0])
    if (Number.isFinite(parsed)) return parsed
  }
  throw new TypeError(
    `idempotent-mutations: ${option} must be a non-negative number of milliseconds or a string like '300ms', '90s', '5m', '24h', '7d' (got ${JSON.stringify(value)})`,
  )
}
