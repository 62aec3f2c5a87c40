import type { Duration, Idempotency } from '../../src'

/** What `scope`, `getKey` and the handler's context are told about a request. */
export interface HttpRequestInfo {
  request: Request
}

/** The options of the plain-HTTP adapters (`withIdempotency`, Hono's and Express's middleware). */
export interface HttpIdempotencyOptions<TTransaction = unknown> {
  /** The engine: `createIdempotency({ store, ... })`. */
  idempotency: Idempotency<TTransaction>
  /**
   * The header that carries the key, such as `'webhook-id'` for Standard Webhooks (Svix).
   * Bare and quoted (IETF structured-field) values are accepted.
   * @default 'Idempotency-Key'
   */
  key?: string | undefined
  /**
   * Finds the key yourself (a Stripe event id read from the body, say); replaces the header.
   * Return `undefined` or `null` for "no key". The request it gets is a clone: read its body
   * freely. @default undefined (the header)
   */
  getKey?:
    | ((request: Request) => string | null | undefined | Promise<string | null | undefined>)
    | undefined
  /**
   * Who is asking (a tenant or user id); the method and path are always added as the operation.
   * Called only for requests that carry a key. If it throws, the request fails.
   * @default undefined (one shared scope)
   */
  scope?:
    | ((
        request: Request,
      ) => string | number | null | undefined | Promise<string | number | null | undefined>)
    | undefined
  /**
   * The methods that are deduplicated; any other passes through and the store is never called.
   * @default ['POST', 'PATCH']
   */
  methods?: readonly string[] | undefined
  /** Count the query string as part of the route (operation) and payload. @default false */
  includeQuery?: boolean | undefined
  /** Reject effectful requests without a key with 400 `KEY_REQUIRED`. @default the engine's */
  required?: boolean | undefined
  /** How long completed records of this route are replayed. @default the engine's `ttl` */
  ttl?: Duration | undefined
  /** How long an execution holds its lease. @default the engine's `lockTimeout` */
  lockTimeout?: Duration | undefined
  /**
   * Which statuses are recorded and replayed (true) instead of releasing the key.
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

/** The contract's policy read from a status: 5xx, 408, 409 and 429 release the key. */
export function defaultHttpStoreStatus(status: number): boolean {
  return status < 500 && status !== 408 && status !== 409 && status !== 429
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
  storeStatus: (status: number) => boolean
  maxResponseBytes: number
}

export function resolveHttpOptions<TTransaction>(
  options: HttpIdempotencyOptions<TTransaction>,
  where: string,
): ResolvedHttpOptions<TTransaction> {
  const { idempotency } = options ?? {}
  if (!idempotency || typeof idempotency.begin !== 'function') {
    throw new TypeError(
      `idempotent-mutations: ${where} needs \`idempotency\` (from createIdempotency)`,
    )
  }
  const maxResponseBytes = options.maxResponseBytes ?? 760 * 1024
  if (!Number.isInteger(maxResponseBytes) || maxResponseBytes < 0) {
    throw new TypeError(`idempotent-mutations: ${where}: maxResponseBytes must be a whole number`)
  }
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
    storeStatus: options.storeStatus ?? defaultHttpStoreStatus,
    maxResponseBytes,
  }
}
