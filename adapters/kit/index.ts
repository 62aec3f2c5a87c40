/**
 * What every adapter shares, so that an adapter only translates between its host and the
 * engine: the common options (documented once, in {@link AdapterOptions}), the failure policy,
 * settling a lease exactly once, the context handed to handlers, and the engine's logger.
 *
 * A new adapter, in its host's hooks:
 *
 *     once        settings = resolveAdapterOptions(options, 'myAdapter', defaultMyStoreErrors,
 *                   'my-host')
 *     per call    key: the header (readKeyHeader), the host's own sources, or
 *                   keyFromGetKey(options.getKey, call); scope: findScope(options.scope, call, where)
 *                 attempt = await settings.idempotency.begin({ key, operation, scope, payload,
 *                   required, transactional: settings.transactional, adapter: settings.adapter })
 *     'bypass'    run, with contextFields(unkeyedContext, settings) in the host's context
 *     'replay'    answer attempt.outcome in the host's form, with `${replayHeader}: true`
 *     'execute'   run (inside runUnderOperation(attempt.lease, ...)), with
 *                   contextFields(attempt.lease, settings); then settle exactly once:
 *                   where the end is seen where it started, lease.complete(value) or
 *                   settleFailure(lease, failure, failurePolicy(storeErrors, logger));
 *                   where it is seen in a later hook, through a Settlement
 *     refusals    an IdempotencyError (thrown by begin, or returned by refusalOf and
 *                   Settlement.settle when a commit fails): its status, code and retryAfter
 *                   in the host's idiom
 *
 * GraphQL hosts build on ../graphql, which does the per-call part for them. Host-free: nothing
 * here loads tRPC, graphql or a web framework.
 */
export {
  type FailurePolicy,
  isDeterministicStatus,
  keepsFailure,
  recordedFailure,
  type Settleable,
  settleFailure,
} from '../../src/settle'
/**
 * Runs the host's handler for a lease with the operation's span active (when traced), so the
 * handler's own spans (its queries, its calls out) are the operation's children.
 */
export { runUnderOperation } from '../../src/telemetry'
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
