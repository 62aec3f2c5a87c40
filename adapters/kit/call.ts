import { callerScope, validateKey } from '../../src/key'
import type { KeyValue, ScopeValue } from './options'

/**
 * The caller's scope of a keyed call: what the `scope` option returns for it, checked (a value
 * that is not a string, number or nothing is a TypeError naming `where`); '' without the option.
 */
export async function findScope<TCall>(
  scope: ((call: TCall) => ScopeValue | PromiseLike<ScopeValue>) | undefined,
  call: TCall,
  where: string,
): Promise<string> {
  return scope ? callerScope(await scope(call), where) : ''
}

/** The key the `getKey` option finds, validated (400 `KEY_INVALID`); undefined for none. */
export async function keyFromGetKey<TLookup>(
  getKey: (lookup: TLookup) => KeyValue | PromiseLike<KeyValue>,
  lookup: TLookup,
): Promise<string | undefined> {
  const key = await getKey(lookup)
  return key === undefined || key === null ? undefined : validateKey(key)
}

/** The response header set on a replayed response (SPEC: `Idempotent-Replay: true`). */
export const replayHeader = 'Idempotent-Replay'
