import { beforeEach, describe } from 'vitest'
import type { IdempotencyStore } from '../store'
import { describeClaims } from './claims'
import { conformanceContext, type StoreConformanceOptions } from './context'
import { describeFencing } from './fencing'
import { describeReplayFidelity } from './fidelity'
import { describeLeases } from './leases'
import { describeOperatorCalls } from './operator'
import { describeRaces } from './races'
import { describeSweep } from './sweep'

/**
 * The store contract (`IdempotencyStore`), as one table of behaviours every store must pass:
 * claim, replay, mismatch, lease, takeover, expiry, fencing, sweep, the operator's calls
 * (`inspect`, `releaseKey`; skipped for a store without them), the races (many concurrent
 * claimers of one key), and replay fidelity through an engine on the store. Call it from a
 * vitest test file:
 *
 *     describeStoreConformance({ name: 'my store', createStore: () => createMyStore(), concurrency: 100 })
 */
export function describeStoreConformance(options: StoreConformanceOptions): void {
  describe(`store conformance: ${options.name}`, () => {
    let store: IdempotencyStore | undefined
    beforeEach(async () => {
      store = await options.createStore()
    })
    const current = (): IdempotencyStore => {
      if (store === undefined) throw new Error('the conformance cases run inside its describe')
      return store
    }
    const context = conformanceContext(options, current)
    describeClaims(context)
    describeLeases(context)
    describeFencing(context)
    describeSweep(context)
    describeOperatorCalls(context)
    describeRaces(context)
    describeReplayFidelity(current, options.clock?.now)
  })
}
