import type { Duration, Idempotency } from '../../src'
import type { FailurePolicy } from '../../src/settle'
import {
  type AdapterOptions,
  assertEngine,
  engineLogger,
  failurePolicy,
  isDeterministicStatus,
} from '../kit'

/**
 * The options of the plain-HTTP adapters (`withIdempotency`, Hono's and Express's middleware):
 * four of the common ones ({@link AdapterOptions}: `scope` gets the request, `getKey` a clone
 * of it), and the ones of plain HTTP routes.
 */
export interface HttpIdempotencyOptions<TTransaction = unknown>
  extends Pick<
    AdapterOptions<Request, never, TTransaction>,
    'idempotency' | 'scope' | 'getKey' | 'required'
  > {
  /**
   * The header that carries the key, such as `'webhook-id'` for Standard Webhooks (Svix).
   * Bare and quoted (IETF structured-field) values are accepted.
   * @default 'Idempotency-Key'
   */
  key?: string | undefined
  /**
   * The methods that are deduplicated; any other passes through and the store is never called.
   * @default ['POST', 'PATCH']
   */
  methods?: readonly string[] | undefined
  /** Count the query string as part of the route (operation) and payload. @default false */
  includeQuery?: boolean | undefined
  /** How long completed records of this route are replayed. @default the engine's `ttl` */
  ttl?: Duration | undefined
  /** How long an execution holds its lease. @default the engine's `lockTimeout` */
  lockTimeout?: Duration | undefined
  /**
   * Which statuses are recorded and replayed (true) instead of releasing the key. If it throws,
   * the key is released and the error is logged.
   * @default defaultHttpStoreStatus (every status but 5xx, 408, 409 and 429)
   */
  storeStatus?: ((status: number) => boolean) | undefined
  /**
   * The largest response body that is recorded, in bytes; a larger one still reaches the first
   * caller whole, and its retries get 422 `RESPONSE_NOT_STORED`. The record holds the body in
   * base64 (4/3 of its size), and the engine's own `maxResponseBytes` (1 MiB by default) bounds
   * the whole record: the default keeps a body of this size within it.
   * @default 778240 (760 KiB)
   */
  maxResponseBytes?: number | undefined
}

/**
 * The contract's policy read from a response status: a success is recorded, and a failure
 * when {@link isDeterministicStatus} holds; 5xx, 408, 409 and 429 release the key.
 */
export function defaultHttpStoreStatus(status: number): boolean {
  return status < 400 || isDeterministicStatus(status)
}

/** The options with their defaults, checked once when the adapter is made. */
export interface ResolvedHttpOptions<TTransaction> {
  idempotency: Idempotency<TTransaction>
  keyHeader: string
  getKey: HttpIdempotencyOptions['getKey']
  scope: HttpIdempotencyOptions['scope']
  methods: ReadonlySet<string>
  includeQuery: boolean
  required: boolean | undefined
  ttl: Duration | undefined
  lockTimeout: Duration | undefined
  /** `storeStatus` as a failure policy: a policy that throws releases the key, logged. */
  statusPolicy: FailurePolicy<number>
  maxResponseBytes: number
  /** The host's name in the engine's telemetry (`OperationRequest.adapter`). */
  adapter: string
}

/** `adapter`: the host's name in the engine's telemetry (`fetch`, `hono`, `express`). */
export function resolveHttpOptions<TTransaction>(
  options: HttpIdempotencyOptions<TTransaction>,
  where: string,
  adapter: string,
): ResolvedHttpOptions<TTransaction> {
  const { idempotency } = options ?? {}
  assertEngine(idempotency, where)
  const maxResponseBytes = options.maxResponseBytes ?? 760 * 1024
  if (!Number.isInteger(maxResponseBytes) || maxResponseBytes < 0) {
    throw new TypeError(`idempotent-mutations: ${where}: maxResponseBytes must be a whole number`)
  }
  const storeStatus = options.storeStatus ?? defaultHttpStoreStatus
  return {
    idempotency,
    keyHeader: options.key ?? 'Idempotency-Key',
    getKey: options.getKey,
    scope: options.scope,
    methods: new Set((options.methods ?? ['POST', 'PATCH']).map((method) => method.toUpperCase())),
    includeQuery: options.includeQuery === true,
    required: options.required,
    ttl: options.ttl,
    lockTimeout: options.lockTimeout,
    statusPolicy: failurePolicy(storeStatus, engineLogger(idempotency), { option: 'storeStatus' }),
    maxResponseBytes,
    adapter,
  }
}
