/**
 * `idempotent-mutations/testing`: the store conformance suite, for authors of a store. Run it
 * from a vitest test file against your store; every store this package ships passes it.
 */
export { createTestClock, type TestClock } from './clock'
export { describeStoreConformance } from './conformance'
export type { StoreConformanceOptions } from './context'
