/**
 * Engine overhead on the in-memory backend: what a keyed first execution and a replay cost over
 * calling the handler directly, next to the two peers on the same kind of backend (a `Map`).
 */
import type { Library } from '../lib/build'
import { type Budget, byName, compare, round, type VariantStats } from '../lib/measure'
import {
  createMapCacheClient,
  createMapStorageAdapter,
  nodeIdempotency,
  powertools,
} from '../lib/peers'
import { type Order, type OrderInput, orderInput } from './fixtures'

export interface EngineResult {
  budget: Budget
  variants: VariantStats[]
  /** CPU µs per operation over the direct call, per library and path. */
  overheadUs: Record<string, { first: number; replay: number }>
  /** Distinct keys replayed in turn on the replay paths. */
  replayKeys: number
}

/** Keys the replay variants cycle through, each recorded before timing starts. */
const replayKeys = 1000

export async function benchEngine(lib: Library, budget: Budget): Promise<EngineResult> {
  let orders = 0
  // The business handler: async, like a real one, and cheap, so the engine's cost shows.
  const handler = async (input: OrderInput): Promise<Order> => ({
    id: `order-${++orders}`,
    item: input.item,
    quantity: input.quantity,
    total: input.quantity * 99.75,
  })

  const idempotency = lib.core.createIdempotency({ store: lib.core.createMemoryStore() })
  const ours = (key: string) =>
    idempotency.execute({ key, operation: 'orders.create', payload: orderInput }, () =>
      handler(orderInput),
    )
  const theirs = {
    powertools: powertools({ client: createMapCacheClient(), keyPrefix: 'bench' }, handler),
    nodeIdempotency: nodeIdempotency(
      { storage: createMapStorageAdapter(), cacheKeyPrefix: 'bench' },
      handler,
    ),
  }

  for (let i = 0; i < replayKeys; i++) {
    await ours(`replay-${i}`)
    await theirs.powertools({ key: `replay-${i}`, input: orderInput })
    await theirs.nodeIdempotency({ key: `replay-${i}`, input: orderInput })
  }

  const variants = [
    { name: 'direct call', op: () => handler(orderInput) },
    { name: 'ours: first execution', op: (i: number) => ours(`first-${i}`) },
    { name: 'ours: replay', op: (i: number) => ours(`replay-${i % replayKeys}`) },
    {
      name: 'powertools: first execution',
      op: (i: number) => theirs.powertools({ key: `first-${i}`, input: orderInput }),
    },
    {
      name: 'powertools: replay',
      op: (i: number) => theirs.powertools({ key: `replay-${i % replayKeys}`, input: orderInput }),
    },
    {
      name: 'node-idempotency: first execution',
      op: (i: number) => theirs.nodeIdempotency({ key: `first-${i}`, input: orderInput }),
    },
    {
      name: 'node-idempotency: replay',
      op: (i: number) =>
        theirs.nodeIdempotency({ key: `replay-${i % replayKeys}`, input: orderInput }),
    },
  ]
  const stats = await compare(variants, budget)

  const direct = byName(stats, 'direct call').cpuUsPerOp
  const over = (name: string) => round(byName(stats, name).cpuUsPerOp - direct, 2)
  const overheadUs = Object.fromEntries(
    ['ours', 'powertools', 'node-idempotency'].map((library) => [
      library,
      { first: over(`${library}: first execution`), replay: over(`${library}: replay`) },
    ]),
  )
  return { budget, variants: stats, overheadUs, replayKeys }
}
