/**
 * A storm: many callers send the same keyed operation at the same moment. The handler counts
 * its runs; anything but one run is a failure of the library under test, and is reported as such.
 */
import { round } from './measure'

export interface StormResult {
  callers: number
  /** How often the handler ran. Exactly 1 is correct. */
  executions: number
  /** From the first call to the last answer, in milliseconds. */
  allAnsweredMs: number
  /** How the callers were answered: `value`, or the kind of error each got. */
  answers: Record<string, number>
  /** Callers still unanswered when the time limit struck (0 unless something hung). */
  unanswered: number
}

export interface StormOptions {
  callers: number
  /** One caller's call. */
  call: () => Promise<unknown>
  /** How many times the handler has run so far. */
  executions: () => number
  /** Names the kind of a caller's error (`409 IN_PROGRESS`, `AlreadyInProgress`, ...). */
  classify: (error: unknown) => string
  /** Stop waiting after this long. @default 60000 */
  limitMs?: number
}

export async function storm(options: StormOptions): Promise<StormResult> {
  const answers: Record<string, number> = {}
  const count = (kind: string) => {
    answers[kind] = (answers[kind] ?? 0) + 1
  }
  let answered = 0
  const before = options.executions()
  const startedAt = performance.now()
  const calls = Array.from({ length: options.callers }, () =>
    options.call().then(
      () => count('value'),
      (error: unknown) => count(options.classify(error)),
    ),
  ).map((call) => call.finally(() => answered++))
  let timer: NodeJS.Timeout | undefined
  const limit = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, options.limitMs ?? 60_000)
  })
  await Promise.race([Promise.all(calls), limit])
  clearTimeout(timer)
  return {
    callers: options.callers,
    executions: options.executions() - before,
    allAnsweredMs: round(performance.now() - startedAt, 1),
    answers,
    unanswered: options.callers - answered,
  }
}

/** The name of an error for a storm's tally: its code, or its class. */
export function errorKind(error: unknown): string {
  const e = error as { code?: unknown; status?: unknown; name?: unknown }
  if (typeof e?.code === 'string')
    return typeof e.status === 'number' ? `${e.status} ${e.code}` : e.code
  return typeof e?.name === 'string' ? e.name : 'error'
}
