import type { HandlerContext } from '../../src'
import type { AdapterSettings } from './options'

/**
 * What a handler is handed of its lease: `takeover`, `deriveKey` and, in transactional mode,
 * `tx`. A copy, never the lease itself: the settling methods (`complete`, `release`) are the
 * adapter's alone.
 */
export function handlerContext<TTransaction>(
  lease: HandlerContext<TTransaction>,
): HandlerContext<TTransaction> {
  const view: HandlerContext<TTransaction> = {
    takeover: lease.takeover,
    deriveKey: lease.deriveKey,
  }
  if (lease.tx !== undefined) view.tx = lease.tx
  return view
}

/** The fields an adapter adds to its host's context: `idempotency`, and the transaction. */
export type ContextFields = { idempotency: HandlerContext<unknown> } & Record<string, unknown>

/**
 * The fields to add to the host's context (tRPC's `ctx`, the GraphQL context) for an operation
 * run under `lease` (or `unkeyedContext`): `idempotency` (a {@link handlerContext}) and, in
 * transactional mode, the transaction under `transactionField`. Undefined when there is nothing
 * to add: no transaction, and `exposeContext` off.
 */
export function contextFields(
  lease: HandlerContext<unknown>,
  settings: Pick<AdapterSettings<unknown>, 'transactionField' | 'exposeContext'>,
): ContextFields | undefined {
  const { tx } = lease
  if (tx === undefined && !settings.exposeContext) return undefined
  const idempotency = handlerContext(lease)
  return tx === undefined ? { idempotency } : { idempotency, [settings.transactionField]: tx }
}
