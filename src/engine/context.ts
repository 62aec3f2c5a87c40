/**
 * The engine context: one engine's options, resolved, and what its parts share. The claim path,
 * the leases and transactional mode are module functions and classes that take it as their first
 * argument, so each can be read (and tested) on its own rather than inside one closure.
 */

import type { OperationTrace } from '../telemetry'
import { BackgroundWork } from './background'
import { type IdempotencyOptions, type ResolvedOptions, resolveOptions } from './options'
import type { IdempotencyEvent, IdempotencyEventType } from './types'

/**
 * What every event of one keyed operation says about it, and the operation's OpenTelemetry
 * trace, which hears of every event too (undefined without an SDK to record it).
 */
export interface EventBase extends Pick<IdempotencyEvent, 'operation' | 'scope' | 'key'> {
  readonly trace?: OperationTrace | undefined
}
export type EventDetails = Omit<IdempotencyEvent, 'type' | 'operation' | 'scope' | 'key'>

export interface EngineContext<TTransaction = unknown> extends ResolvedOptions<TTransaction> {
  /** Completions still being retried after their caller got its value. */
  readonly background: BackgroundWork
  /**
   * The stored scope of the shared scope ('') per operation: building it on every keyed call
   * costs more than a lookup, and most calls use a few operations. Bounded by clearing.
   */
  readonly sharedScopes: Map<string, string>
}

/** Checks `options` (see resolveOptions) and sets up the engine's shared parts. */
export function createEngineContext<TTransaction>(
  options: IdempotencyOptions<TTransaction>,
): EngineContext<TTransaction> {
  return { ...resolveOptions(options), background: new BackgroundWork(), sharedScopes: new Map() }
}

/**
 * Reports an event to the operation's trace and to `onEvent`; what `onEvent` throws is logged,
 * never raised. The event object is built only when someone listens: this sits on every keyed
 * call's path.
 */
export function emit(
  context: EngineContext<unknown>,
  base: EventBase,
  type: IdempotencyEventType,
  details?: EventDetails,
): void {
  base.trace?.event(type, details)
  const { onEvent } = context
  if (!onEvent) return
  try {
    const { operation, scope, key } = base
    onEvent({ operation, scope, key, type, ...details })
  } catch (error) {
    context.logger.error('onEvent threw', error)
  }
}

/** A `Retry-After` in whole seconds, at least 1, from milliseconds. */
export function retryAfterSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000))
}
