/**
 * What every adapter shares, so that an adapter only translates between its host and the
 * engine: the common options (documented once, in {@link AdapterOptions}), the failure policy,
 * settling a lease exactly once, the context handed to handlers, and the engine's logger.
 *
 * A new adapter:
 *
 *     const settings = resolveAdapterOptions(options, 'myAdapter', defaultMyStoreErrors)
 *     // per call: find the key (the header, the host's own sources, or keyFromGetKey), then
 *     const attempt = await settings.idempotency.begin({ key, operation, scope: await
 *       findScope(options.scope, call, 'scope(call)'), payload, required, transactional })
 *     // 'bypass': run with contextFields(unkeyedContext, settings)
 *     // 'replay': answer attempt.outcome in the host's form, with Idempotent-Replay: true
 *     // 'execute': run with contextFields(attempt.lease, settings), then settle once: where
 *     //   the end is seen where it started, complete / settleFailure(lease, failure,
 *     //   failurePolicy(...)); where it is seen in a later hook, a Settlement
 *     // any IdempotencyError: answer error.status and error.code in the host's idiom
 *
 * Host-free: nothing here loads tRPC, graphql or a web framework.
 */
export {
  type FailurePolicy,
  isDeterministicStatus,
  keepsFailure,
  recordedFailure,
  type Settleable,
  settleFailure,
} from '../../src/settle'
export { findScope, keyFromGetKey, replayHeader } from './call'
export { type ContextFields, contextFields, handlerContext } from './context'
export {
  type AdapterOptions,
  type AdapterSettings,
  assertEngine,
  engineLogger,
  type KeyValue,
  resolveAdapterOptions,
  type ScopeValue,
} from './options'
export { type FailurePolicyOptions, failurePolicy, refusalOf, Settlement } from './settle'
