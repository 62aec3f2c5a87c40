/**
 * The engine's memory per 1,000 operations in flight, on the memory store: N first executions
 * whose handlers all wait on one promise held here, against a hand-written baseline of N pending
 * async calls holding the same request (key and payload). Each figure is the heap in use after a
 * full garbage collection once every handler has started, minus the same before the calls
 * started, per 1,000 calls; then the promise resolves and every call completes. The collector is
 * the V8 `gc()` (exposed at run time with `v8.setFlagsFromString('--expose-gc')` when the process
 * was not started with it). Ours minus the baseline is the engine's own share: its lease and
 * closures, and the memory store's record of each key.
 */
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import type { Library } from '../lib/build'
import { medianOf } from '../lib/measure'
import type { Order, OrderInput } from './fixtures'

export interface InFlightMemory {
  operations: number
  /** Heap bytes held per 1,000 first executions in flight (memory store). */
  oursPer1000: number
  /** Heap bytes held per 1,000 plain pending calls holding the same requests. */
  baselinePer1000: number
  /** Ours minus the baseline: the engine's and its memory store's share. */
  enginePer1000: number
}

interface Request {
  key: string
  operation: string
  payload: OrderInput
}

/** About 100 bytes of JSON, a new object per call, as a parsed request body would be. */
const requestOf = (i: number): Request => ({
  key: `in-flight-${i}`,
  operation: 'orders.create',
  payload: {
    item: 'standing desk',
    quantity: 1 + (i % 9),
    customer: { id: `customer-${i}`, tier: 'gold' },
    notes: ['gift wrap', 'leave at the door'],
  },
})

const orderFrom = (request: Request): Order => ({
  id: `order-${request.key}`,
  item: request.payload.item,
  quantity: request.payload.quantity,
  total: request.payload.quantity * 99.75,
})

export interface InFlightBudget {
  /** Operations in flight at once. */
  operations: number
  /** Readings of each figure; the median is reported. */
  repeats: number
}

/** Starts call `i`; its handler calls `started`, then waits for `gate`. */
type Start = (i: number, gate: Promise<void>, started: () => void) => Promise<unknown>

export async function inFlightMemory(
  lib: Library,
  budgets: InFlightBudget[],
): Promise<InFlightMemory[]> {
  const collect = garbageCollector()
  const baseline: Start = (i, gate, started) => {
    const request = requestOf(i)
    return (async () => {
      started()
      await gate
      return orderFrom(request)
    })()
  }
  const ours = (): Start => {
    const store = lib.core.createMemoryStore({
      maxRecords: 2 * Math.max(...budgets.map((b) => b.operations)),
    })
    const idempotency = lib.core.createIdempotency({ store })
    return (i, gate, started) => {
      const request = requestOf(i)
      return idempotency.execute(request, async () => {
        started()
        await gate
        return orderFrom(request)
      })
    }
  }
  // Untimed: the JIT and the engine's lazily built parts settle first.
  await heldPer1000(1000, baseline, collect)
  await heldPer1000(1000, ours(), collect)
  const results: InFlightMemory[] = []
  for (const { operations, repeats } of budgets) {
    // Single readings move by a few hundred KB now and then (hundreds of bytes per call at
    // 1,000 calls, tens at 10,000): each figure is the median of a few, the two kinds in turn.
    const baselines: number[] = []
    const oursAll: number[] = []
    for (let i = 0; i < repeats; i++) {
      baselines.push(await heldPer1000(operations, baseline, collect))
      oursAll.push(await heldPer1000(operations, ours(), collect))
    }
    const baselinePer1000 = medianOf(baselines)
    const oursPer1000 = medianOf(oursAll)
    results.push({
      operations,
      oursPer1000,
      baselinePer1000,
      enginePer1000: oursPer1000 - baselinePer1000,
    })
  }
  return results
}

/** Heap bytes per 1,000 calls that `start` holds while all `count` of them are in flight. */
async function heldPer1000(count: number, start: Start, collect: () => void): Promise<number> {
  let open = () => {}
  const gate = new Promise<void>((resolve) => {
    open = resolve
  })
  let started = 0
  let allStarted = () => {}
  const everyoneStarted = new Promise<void>((resolve) => {
    allStarted = resolve
  })
  const onStart = () => {
    if (++started === count) allStarted()
  }
  const calls: Promise<unknown>[] = new Array(count)
  // What the last calls still do after answering (their microtasks) ends first, or its garbage
  // would be freed during this measurement.
  await new Promise((resolve) => setImmediate(resolve))
  collect()
  const before = process.memoryUsage().heapUsed
  for (let i = 0; i < count; i++) calls[i] = start(i, gate, onStart)
  await everyoneStarted
  collect()
  const held = process.memoryUsage().heapUsed - before
  open()
  await Promise.all(calls)
  return Math.round((held / count) * 1000)
}

/** The V8 collector: `gc()` if the process has it, else exposed now (a full collection per call). */
function garbageCollector(): () => void {
  const exposed = (globalThis as { gc?: () => void }).gc
  if (exposed) return () => exposed()
  setFlagsFromString('--expose-gc')
  return runInNewContext('gc') as () => void
}
