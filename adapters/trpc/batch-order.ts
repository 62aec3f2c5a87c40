import type { MiddlewareResult } from '@trpc/server/unstable-core-do-not-import'

/**
 * Calls of one procedure under one key inside one HTTP batch are one operation (SPEC): the
 * later ones wait for the earlier one here and then replay it, instead of racing it into a 409.
 * Keyed by the request object, so separate requests never wait on each other.
 */
const batchCalls = new WeakMap<object, Map<string, Promise<void>>>()

/** A call's result, and when its lease settled (a stream's: once tRPC has read it). */
export interface Ran {
  result: MiddlewareResult<object>
  settled?: Promise<void> | undefined
}

export async function inBatchOrder(
  request: object,
  id: string,
  run: () => Promise<Ran>,
): Promise<MiddlewareResult<object>> {
  let calls = batchCalls.get(request)
  if (calls === undefined) {
    calls = new Map()
    batchCalls.set(request, calls)
  }
  const before = calls.get(id)
  const mine = before === undefined ? run() : before.then(run)
  // Only the earlier call's settling matters, not how it ended: the engine reads its record. A
  // streamed call returns before its lease settles, so the next one waits for `settled`.
  const done = mine.then(
    (ran) => ran.settled,
    () => undefined,
  )
  calls.set(id, done)
  void done.then(() => {
    if (calls.get(id) === done) calls.delete(id)
  })
  return (await mine).result
}
