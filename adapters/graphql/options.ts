import type { DocumentNode, GraphQLError } from 'graphql'
import type { HandlerContext, Logger } from '../../src'
import type { FailurePolicy } from '../../src/settle'
import {
  type AdapterOptions,
  type AdapterSettings,
  failurePolicy,
  resolveAdapterOptions,
} from '../kit'
import { defaultStoreGraphQLErrors } from './result'

// The context is whatever the server builds; like Envelop's own default, it is loosely typed
// so `scope: (context) => context.user?.id` type-checks without a type argument.
// biome-ignore lint/suspicious/noExplicitAny: mirrors Envelop's `Record<string, any>` default
export type DefaultContext = Record<string, any>

/**
 * The fields the plugin adds to the GraphQL context of a mutation: `idempotency` (with
 * `exposeContext` or in transactional mode) and the transaction (`tx`, or your
 * `transactionField`, in transactional mode). Intersect it with your context type.
 */
export type IdempotencyContextFields<TTransaction = unknown, TField extends string = 'tx'> = {
  idempotency?: HandlerContext<TTransaction> | undefined
} & { [K in TField]?: TTransaction }

/** What `getKey` is given to find the key of one mutation operation. */
export interface KeyLookup<TContext> {
  /** The GraphQL context (in Yoga: with `request` and `params`; in Apollo: your `contextValue`). */
  context: TContext
  /** The mutation's root field names, sorted. */
  fieldNames: readonly string[]
  document: DocumentNode
  operationName: string | undefined
  variables: Readonly<Record<string, unknown>>
}

/**
 * The options of a GraphQL adapter: the common ones ({@link AdapterOptions}: `scope` gets the
 * context, `getKey` a {@link KeyLookup}, `storeErrors` each `GraphQLError` of the result, by
 * default `defaultStoreGraphQLErrors`), `mode` and `logger`.
 */
export interface GraphQLIdempotencyOptions<TContext = DefaultContext>
  extends AdapterOptions<TContext, GraphQLError, unknown, KeyLookup<TContext>> {
  /**
   * `'all'`: every mutation that carries a key is deduplicated. `'marked'`: only mutations with
   * a root field marked by `@idempotent` or `extensions.idempotency`; others run untouched.
   * @default 'all'
   */
  mode?: 'all' | 'marked' | undefined
  /** Where the plugin's diagnostics go. @default the engine's logger */
  logger?: Logger | undefined
}

/** The options with their defaults, checked once when the adapter is made. */
export interface GraphQLSettings<TContext> extends AdapterSettings<GraphQLError> {
  mode: 'all' | 'marked'
  /** Whether operations run in transactions: the adapter's option, else the engine's. */
  inTransaction: boolean
  scope: GraphQLIdempotencyOptions<TContext>['scope']
  getKey: GraphQLIdempotencyOptions<TContext>['getKey']
  /** `storeErrors` as a failure policy: one that throws releases the key, logged. */
  policy: FailurePolicy<GraphQLError>
}

/** `adapter`: the host's name in the engine's telemetry (`envelop`, `apollo`). */
export function resolveGraphQLOptions<TContext>(
  options: GraphQLIdempotencyOptions<TContext>,
  where: string,
  adapter: string,
): GraphQLSettings<TContext> {
  const settings = resolveAdapterOptions(options, where, defaultStoreGraphQLErrors, adapter)
  const mode = options.mode ?? 'all'
  if (mode !== 'all' && mode !== 'marked') {
    throw new TypeError(
      `idempotent-mutations: mode must be 'all' or 'marked' (got ${JSON.stringify(mode)})`,
    )
  }
  return {
    ...settings,
    mode,
    inTransaction: settings.transactional ?? settings.idempotency.transactional ?? false,
    scope: options.scope,
    getKey: options.getKey,
    policy: failurePolicy(settings.storeErrors, settings.logger),
  }
}
