/**
 * The scope string a record is stored under, for a caller scope and an operation: what the
 * stores' `inspect(scope, key)` and `releaseKey(scope, key)` take to find the record of one
 * keyed operation. The engine joins the two as a JSON array, so no pair of them can be read two
 * ways; `onEvent` reports them apart (`event.scope`, `event.operation`).
 *
 * ```ts
 * await store.inspect(storedScope({ scope: 'user-1', operation: 'orders.create' }), key)
 * ```
 */
export function storedScope(request: { scope?: string | undefined; operation: string }): string {
  return JSON.stringify([request.scope ?? '', request.operation])
}

/** The caller scope and operation of a stored scope, or undefined if it is not one of the engine's. */
export function parseStoredScope(stored: string): { scope: string; operation: string } | undefined {
  try {
    const parsed: unknown = JSON.parse(stored)
    if (
      Array.isArray(parsed) &&
      parsed.length === 2 &&
      typeof parsed[0] === 'string' &&
      typeof parsed[1] === 'string'
    ) {
      return { scope: parsed[0], operation: parsed[1] }
    }
  } catch {}
  return undefined
}
