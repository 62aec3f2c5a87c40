/** A clock a test moves by hand; hand `now` to the store under test. */
export interface TestClock {
  now(): number
  advance(ms: number): void
}

/** A {@link TestClock} starting at `start` (epoch milliseconds). */
export function createTestClock(start = Date.UTC(2030, 0, 1)): TestClock {
  let at = start
  return {
    now: () => at,
    advance: (ms) => {
      at += ms
    },
  }
}
