import { defaultLogger, type Idempotency, type Logger } from '../../src'
import { assertTransactionalStore } from '../../src/engine/options'
import { defaultKeyField } from '../../src/key'

/** What a `scope` function returns: a string or number, or nothing for the shared scope. */
export type ScopeValue = string | number | null | undefined

/** What a `getKey` function returns: the key, or `undefined` / `null` for none. */
export type KeyValue = string | null | undefined

/**
 * The options every adapter shares, documented once. Each adapter's option type derives from
 * these, naming what its host hands the functions: `TCall` is what `scope` gets, `TLookup` what
 * `getKey` gets, `TFailure` what `storeErrors` gets.
 *
 * - tRPC: `{ ctx, path, input }` for both, the `TRPCError` a procedure failed with;
 * - GraphQL (Envelop, Yoga, Apollo Server): the context, `{ context, fieldNames, document, ... }`,
 *   each `GraphQLError` of the result;
 * - plain HTTP (Fetch, Hono, Express): the `Request` for both (`getKey` gets a clone, whose body
 *   it may read), and a status policy of its own (`storeStatus`) instead of `storeErrors`.
 */
export interface AdapterOptions<TCall, TFailure, TTransaction = unknown, TLookup = TCall> {
  /** The engine: `createIdempotency({ store, ... })`. Its logger is the adapter's too. */
  idempotency: Idempotency<TTransaction>
  /**
   * Who is asking (a tenant or user id). Records of different scopes never meet: the same key
   * from two scopes names two unrelated operations; the operation (the procedure path, the
   * mutation's root fields, the method and path) is always added. May be async. Called only for
   * calls that carry a key. If it throws, the call fails and nothing runs: it never falls back
   * to a shared scope; a value that is not a string, number, null or undefined fails it with a
   * TypeError.
   * @default undefined (one scope for every caller, '')
   */
  scope?: ((call: TCall) => ScopeValue | PromiseLike<ScopeValue>) | undefined
  /**
   * Finds the key yourself, replacing every other source (the `Idempotency-Key` header, the
   * tRPC input field, the GraphQL argument and `extensions`). Return `undefined` or `null` for
   * "no key". May be async.
   * @default undefined (the header, and the input field, argument or extensions)
   */
  getKey?: ((lookup: TLookup) => KeyValue | PromiseLike<KeyValue>) | undefined
  /**
   * The name of the field that carries a per-call key: the tRPC input field, the GraphQL
   * root-field argument (also looked for inside the field's `input` argument) and the request
   * `extensions` field. It is not part of the fingerprint.
   * @default 'idempotencyKey'
   */
  keyField?: string | undefined
  /**
   * Reject calls without a key with 400 `KEY_REQUIRED`. A procedure's
   * `meta.idempotency.required`, or a GraphQL field's `@idempotent(required:)`, overrides it.
   * @default undefined (the engine's `required`, itself false by default)
   */
  required?: boolean | undefined
  /**
   * Which failures are recorded and replayed (true) instead of releasing the key so a retry
   * runs again. tRPC calls it with the `TRPCError` the procedure failed with (a plain throw
   * arrives as INTERNAL_SERVER_ERROR with the original in `cause`); GraphQL with each error of
   * the result as the executor produced it (before masking, so `originalError` is there to
   * inspect), and records the result only if every call returns true. If it throws, the key is
   * released and the error is logged.
   * @default the adapter's `default...StoreErrors`: `isDeterministicStatus` (a 4xx other than
   * 408, 409 and 429) read in the host's terms
   */
  storeErrors?: ((failure: TFailure) => boolean) | undefined
  /**
   * Run each keyed operation in one database transaction with its record (the engine's
   * transactional mode; needs the Drizzle store, else a TypeError here): the handler writes
   * through the context's transaction (`tx`, or `transactionField`), and its writes commit with
   * the recorded outcome or not at all. Operations without a key get a transaction too.
   * @default undefined (the engine's `transactional`, itself false by default)
   */
  transactional?: boolean | undefined
  /** The context field that carries the transaction in transactional mode. @default 'tx' */
  transactionField?: string | undefined
  /**
   * Add `idempotency` (`deriveKey(name)`, `takeover`, `tx`) to the context of every mutation
   * the adapter runs. Transactional mode always adds it. For a mutation without a key,
   * `deriveKey` throws.
   * @default false
   */
  exposeContext?: boolean | undefined
}

/** The common options with their defaults, checked once when the adapter is made. */
export interface AdapterSettings<TFailure, TTransaction = unknown> {
  idempotency: Idempotency<TTransaction>
  keyField: string
  required: boolean | undefined
  storeErrors: (failure: TFailure) => boolean
  /** The adapter's own `transactional`; undefined leaves the engine's. */
  transactional: boolean | undefined
  transactionField: string
  exposeContext: boolean
  /** The engine's logger (or the adapter's own `logger` option, where it has one). */
  logger: Logger
  /** The adapter's name, which its requests carry to the engine (`OperationRequest.adapter`). */
  adapter: string
}

/**
 * The engine's logger. Adapters log through it, so one `logger` option on the engine routes
 * every diagnostic. An engine that does not expose one logs to the console, prefixed.
 */
export function engineLogger(idempotency: Idempotency<unknown>): Logger {
  // An engine made by another copy of the library, or a hand-written stand-in, may have none.
  return (idempotency as { logger?: Logger | undefined }).logger ?? defaultLogger
}

/** Throws a TypeError unless `idempotency` is an engine (`where` names the adapter's factory). */
export function assertEngine(idempotency: unknown, where: string): void {
  if (!idempotency || typeof (idempotency as Idempotency).begin !== 'function') {
    throw new TypeError(
      `idempotent-mutations: ${where} needs \`idempotency\` (from createIdempotency)`,
    )
  }
}

/**
 * Checks the common options and applies their defaults: a missing engine, or `transactional:
 * true` on a store without transactions, is a TypeError here, when the server starts.
 * `adapter` names the adapter in the engine's telemetry (`trpc`, `envelop`, `apollo`, ...).
 */
export function resolveAdapterOptions<TFailure, TTransaction>(
  options: AdapterOptions<never, TFailure, TTransaction, never> & { logger?: Logger | undefined },
  where: string,
  defaultStoreErrors: (failure: TFailure) => boolean,
  adapter: string,
): AdapterSettings<TFailure, TTransaction> {
  const { idempotency } = options ?? {}
  assertEngine(idempotency, where)
  if (options.transactional === true) {
    assertTransactionalStore(idempotency.store, `${where}({ transactional: true })`)
  }
  return {
    idempotency,
    keyField: options.keyField ?? defaultKeyField,
    required: options.required,
    storeErrors: options.storeErrors ?? defaultStoreErrors,
    transactional: options.transactional,
    transactionField: options.transactionField ?? 'tx',
    exposeContext: options.exposeContext === true,
    logger: options.logger ?? engineLogger(idempotency),
    adapter,
  }
}
