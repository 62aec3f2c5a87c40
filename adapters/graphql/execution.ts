import {
  defaultFieldResolver,
  type ExecutionResult,
  type FormattedExecutionResult,
  type GraphQLError,
  type GraphQLField,
  type GraphQLSchema,
} from 'graphql'
import type { Lease } from '../../src'
import type { FailurePolicy } from '../../src/settle'
import { type ContextFields, contextFields, keepsFailure, Settlement } from '../kit'
import type { GraphQLSettings } from './options'
import { errorResult, recordResult, toGraphQLError } from './result'
import { fieldPolicies } from './schema-options'

/**
 * Transactional mode runs each root mutation field's resolver in a savepoint, so a field that
 * throws (an expected error the result records) drops its own writes and keeps the other
 * fields'. Resolvers are wrapped once per schema, in place (as Envelop's `useOnResolve` does);
 * a wrapped resolver looks its operation up here and calls straight through for any other.
 */
const fieldSavepoints = new WeakMap<object, <T>(resolve: () => T | Promise<T>) => Promise<T>>()
const savepointWrapped = Symbol('idempotent-mutations: root field runs in a savepoint')

function runRootFieldsInSavepoints(schema: GraphQLSchema): void {
  const mutation = schema.getMutationType()
  if (!mutation) return
  for (const field of Object.values(mutation.getFields())) {
    const marked = field as GraphQLField<unknown, unknown> & { [savepointWrapped]?: true }
    if (marked[savepointWrapped]) continue
    const resolve = field.resolve ?? defaultFieldResolver
    field.resolve = (source, args, context, info) => {
      const inSavepoint =
        context !== null && typeof context === 'object' ? fieldSavepoints.get(context) : undefined
      if (!inSavepoint) return resolve(source, args, context, info)
      return inSavepoint(() => resolve(source, args, context, info))
    }
    marked[savepointWrapped] = true
  }
}

/**
 * What a GraphQL adapter does with each schema it serves (Envelop's `onSchemaChange`, Apollo's
 * `schemaDidLoadOrUpdate`): reads (and checks) the directive and extensions once, so a
 * malformed option fails at startup instead of on a request, and in transactional mode wraps
 * the root mutation fields' resolvers in savepoints.
 */
export function prepareSchema(settings: GraphQLSettings<never>, schema: GraphQLSchema): void {
  fieldPolicies(schema)
  if (settings.inTransaction) runRootFieldsInSavepoints(schema)
}

export function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return (
    value !== null &&
    typeof value === 'object' &&
    typeof (value as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function'
  )
}

/**
 * A keyed mutation operation this process runs under a lease, from its claim to its end:
 *
 *     claim                 `fields` go into the GraphQL context (`idempotency`, `tx`)
 *     executor returns      judge(result): does `storeErrors` keep each of its own errors?
 *                           (after this, a masked unexpected error looks like any other)
 *     result the client     finish(result): record it, or release the key; exactly once,
 *     gets (or request end)   whichever hook comes first
 */
export class MutationExecution extends Settlement {
  /** The fields to add to the operation's GraphQL context; undefined when there are none. */
  readonly fields: ContextFields | undefined
  /** The engine's operation: the mutation's root field names. */
  readonly operation: string
  readonly #context: object
  readonly #policy: FailurePolicy<GraphQLError>

  constructor(lease: Lease, operation: string, context: object, settings: GraphQLSettings<never>) {
    super(lease)
    this.operation = operation
    this.#context = context
    this.#policy = settings.policy
    this.fields = contextFields(lease, settings)
    const { savepoint } = lease
    if (savepoint && this.fields) {
      const { transactionField } = settings
      const view = this.fields.idempotency
      const fields = context as Record<string, unknown>
      // `tx` follows the current savepoint, in the context and in its `idempotency` view.
      fieldSavepoints.set(context, (resolveField) =>
        savepoint(async (fieldTx) => {
          const previous = fields[transactionField]
          fields[transactionField] = fieldTx
          view.tx = fieldTx
          try {
            return await resolveField()
          } finally {
            fields[transactionField] = previous
            view.tx = previous
          }
        }),
      )
    }
  }

  /**
   * Judges the executor's own result, before any plugin (a masker included) touched it: the one
   * place where an error thrown on purpose and an unexpected one still differ. It may be
   * recorded when `storeErrors` keeps each of its errors (a result without errors: yes).
   */
  judge(result: ExecutionResult): void {
    this.recordable = (result.errors ?? []).every((error) => keepsFailure(this.#policy, error))
  }

  /**
   * Settles with the result the client gets (undefined: there is none, the key is released) and
   * the HTTP status it gets, where the result does not carry it in `extensions.http`; and
   * returns what the client must get instead, if anything: an error result for a transaction
   * that did not commit (STORE_UNAVAILABLE: nothing happened; OUTCOME_UNKNOWN: its COMMIT was
   * not confirmed, so it may have happened; retry with the same key either way), or the result
   * without `data` for one that was rolled back (its `data` describes writes that no longer
   * exist).
   */
  async finish<TResult extends ExecutionResult | FormattedExecutionResult>(
    result: TResult | undefined,
    status?: number,
  ): Promise<TResult | ExecutionResult | undefined> {
    fieldSavepoints.delete(this.#context)
    const refusal = await this.settle(
      result === undefined ? undefined : () => recordResult(result, status),
    )
    if (refusal !== undefined) return errorResult(toGraphQLError(refusal))
    if (this.rolledBack && result?.data != null) return { ...result, data: null }
    return undefined
  }
}
