/**
 * `createIdempotency`: an engine over one store. The work is done by the claim path
 * (./claim.ts), the leases (./lease.ts, ./transactional.ts) and the outcome codec
 * (./outcome.ts), each on the engine context (./context.ts) made here from the options.
 */
import { runUnderLease } from '../settle'
import { runUnderOperation } from '../telemetry'
import { begin } from './claim'
import { createEngineContext, type EngineContext } from './context'
import { unkeyedContext } from './lease'
import type { IdempotencyOptions } from './options'
import { defaultDeserializeError, defaultSerializeError } from './outcome'
import type { ExecuteRequest, ExecuteResult, HandlerContext, Idempotency } from './types'

export function createIdempotency<TTransaction = unknown>(
  options: IdempotencyOptions<TTransaction>,
): Idempotency<TTransaction> {
  const context = createEngineContext(options)
  const { store, background } = context
  // A store without a clock of its own (the memory store) follows the engine's, Date.now
  // included; last, so that an engine refused for a bad option leaves the store untouched.
  store.useClock?.(context.now)
  const sweeping = startSweeping(context)
  return {
    // The transactional overload differs only in its handler's type: a handler that needs
    // `tx` runs with a transactional request, which hands it one.
    execute: (<T>(
      request: ExecuteRequest,
      handler: (handlerContext: HandlerContext<TTransaction>) => T | Promise<T>,
    ) => execute(context, request, handler)) as Idempotency<TTransaction>['execute'],
    begin: (request) => begin(context, request),
    sweep: (options) => store.sweep(options),
    drain: () => background.drain(),
    close: async () => {
      const stopping = sweeping?.stop()
      background.close()
      await stopping
    },
    store,
    logger: context.logger,
    transactional: context.transactional,
    required: context.required,
  }
}

/**
 * The engine's `execute`: begins the operation, runs the handler when it must, and settles the
 * lease with its outcome: a value is recorded; an error is recorded when `storeErrors` says it
 * is deterministic, and otherwise releases the key for a retry.
 */
async function execute<TTransaction, T>(
  context: EngineContext<TTransaction>,
  request: ExecuteRequest,
  handler: (context: HandlerContext<TTransaction>) => T | Promise<T>,
): Promise<ExecuteResult<T>> {
  const attempt = await begin(context, request)
  if (attempt.kind === 'bypass') {
    return { value: await handler(unkeyedContext), replayed: false }
  }
  if (attempt.kind === 'replay') {
    const { outcome } = attempt
    if (outcome.ok) return { value: outcome.value as T, replayed: true }
    throw (request.deserializeError ?? defaultDeserializeError)(outcome.error)
  }
  const { lease } = attempt
  // A throwing policy must not leave the lease (in transactional mode, a transaction and its
  // connection) unsettled: the key is released, and the handler's error stands.
  // With telemetry, the handler's own spans are children of the operation's.
  const run = context.telemetry
    ? () => runUnderOperation(lease, () => handler(lease))
    : () => handler(lease)
  const value = await runUnderLease(lease, run, {
    storeErrors: request.storeErrors ?? context.storeErrors,
    serializeError: request.serializeError ?? defaultSerializeError,
    onPolicyError: (thrown) =>
      context.logger.error(
        `storeErrors or serializeError threw for operation ${request.operation}`,
        thrown,
      ),
  })
  return { value, replayed: false }
}

/**
 * Runs `store.sweep()` on the `sweepInterval` (an unref'd timer), one sweep at a time, until
 * `stop()` or the abort of `sweepOptions.signal`: either ends the timer and the sweep that is
 * running. `stop()` resolves once that sweep has ended.
 */
function startSweeping(context: EngineContext<unknown>): { stop(): Promise<void> } | undefined {
  const { store, sweepInterval, sweepOptions, logger } = context
  if (sweepInterval === undefined) return undefined
  const stopped = new AbortController()
  const options = { ...sweepOptions, signal: stopped.signal }
  // One sweep at a time: a backlog that outlasts the interval is not swept twice at once.
  let running: Promise<void> | undefined
  const timer = setInterval(() => {
    running ??= store
      .sweep(options)
      .then(
        () => undefined,
        (error: unknown) => logger.error('sweep failed', error),
      )
      .finally(() => {
        running = undefined
      })
  }, sweepInterval)
  timer.unref()
  const end = () => {
    clearInterval(timer)
    stopped.abort()
  }
  // The caller's own signal ends the sweeps for good, as close() does.
  const own = sweepOptions.signal
  if (own?.aborted) end()
  own?.addEventListener('abort', end, { once: true })
  return {
    stop: async () => {
      end()
      own?.removeEventListener('abort', end)
      await running
    },
  }
}
