import { vi } from 'vitest'
import type { IdempotencyStore } from '../../src'

/**
 * `store` as the engine sees a store whose records live elsewhere (not `inProcess`), so the
 * engine's replay cache stands in front of it; its claims, completions and releases are spied.
 */
export function remoteStore(store: IdempotencyStore) {
  return {
    claim: vi.fn(store.claim.bind(store)),
    complete: vi.fn(store.complete.bind(store)),
    release: vi.fn(store.release.bind(store)),
    get: store.get.bind(store),
    sweep: store.sweep.bind(store),
  } satisfies IdempotencyStore
}
