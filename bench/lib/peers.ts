/**
 * The two peer libraries, wired the way their documentation shows, behind one small interface
 * so every section drives ours and theirs through the same loop. Benchmark-only: nothing in
 * `src/` imports these packages.
 *
 * - Powertools (`@aws-lambda-powertools/idempotency`): `makeIdempotent` over its cache
 *   persistence layer. It ships no in-memory persistence layer (its `useLocalCache` is an LRU in
 *   front of a real one), so the in-memory runs give the cache layer a `Map` behind the same
 *   three-call client interface (`get`, `set` with NX/EX, `del`) it uses on Redis.
 * - `@node-idempotency/core`: `onRequest` before the handler, `onResponse` after it. Its
 *   in-memory adapter package is not installed here, so the in-memory runs use a `Map` behind its
 *   `StorageAdapter` interface (`setIfNotExists`, `set`, `get`); the Redis runs use its own
 *   `@node-idempotency/storage-adapter-redis`.
 */
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency'
import { CachePersistenceLayer } from '@aws-lambda-powertools/idempotency/cache'
import type { CacheClient } from '@aws-lambda-powertools/idempotency/cache/types'
import { Idempotency as NodeIdempotency } from '@node-idempotency/core'
import type { StorageAdapter } from '@node-idempotency/storage'

/** One keyed call, the same shape for every library. */
export interface Call<I> {
  key: string
  input: I
}

/** Runs `handler` once per key and returns its value, or the recorded one, to each call. */
export type Protected<I, O> = (call: Call<I>) => Promise<O>

/** Counts the calls that reach a store, one per network round trip for the Redis clients. */
export interface Counter {
  count: number
}

/** A `Map` behind Powertools' cache-client interface, with Redis' SET NX/EX semantics. */
export function createMapCacheClient(): CacheClient {
  const entries = new Map<string, { value: string; expiresAt: number }>()
  const live = (name: string) => {
    const entry = entries.get(name)
    if (entry && entry.expiresAt <= Date.now()) {
      entries.delete(name)
      return undefined
    }
    return entry
  }
  return {
    async get(name) {
      return live(name)?.value ?? null
    },
    async set(name, value, options) {
      const { EX, NX } = (options ?? {}) as { EX?: number; NX?: boolean }
      const key = String(name)
      if (NX && live(key)) return null
      const ttlMs = EX === undefined ? Number.POSITIVE_INFINITY : EX * 1000
      entries.set(key, { value: String(value), expiresAt: Date.now() + ttlMs })
      return 'OK'
    },
    async del(keys) {
      let deleted = 0
      for (const key of keys) if (entries.delete(key)) deleted++
      return deleted
    },
  }
}

/** A `Map` behind @node-idempotency's `StorageAdapter` interface (SET NX/PX semantics). */
export function createMapStorageAdapter(): StorageAdapter {
  const entries = new Map<string, { value: string; expiresAt: number }>()
  const live = (key: string) => {
    const entry = entries.get(key)
    if (entry && entry.expiresAt <= Date.now()) {
      entries.delete(key)
      return undefined
    }
    return entry
  }
  const put = (key: string, value: string, ttl: number | undefined) =>
    entries.set(key, { value, expiresAt: Date.now() + (ttl ?? Number.POSITIVE_INFINITY) })
  return {
    async setIfNotExists(key, value, { ttl } = {}) {
      if (live(key)) return false
      put(key, value, ttl)
      return true
    },
    async set(key, value, { ttl }) {
      put(key, value, ttl)
    },
    async get(key) {
      return live(key)?.value
    },
  }
}

/** Wraps each named method of `target` so every call adds one to `counter`. */
export function countCalls<T extends object>(target: T, methods: string[], counter: Counter): T {
  const record = target as Record<string, unknown>
  for (const name of methods) {
    const original = record[name]
    if (typeof original !== 'function') throw new Error(`bench: ${name} is not a method`)
    record[name] = (...args: unknown[]) => {
      counter.count++
      return (original as (...a: unknown[]) => unknown).apply(target, args)
    }
  }
  return target
}

export interface PowertoolsOptions {
  client: CacheClient
  /** Prefix of every record key, so runs never meet. */
  keyPrefix: string
  /** Record lifetime. @default 3600 */
  expiresAfterSeconds?: number
}

/**
 * Powertools' `makeIdempotent` around `handler`: the key is the event's `idempotencyKey`. Runs
 * WITHOUT payload validation, so it does less than our engine (no fingerprint check): in 2.35.0
 * the cache layer drops the validation hash when it completes a record, so with
 * `payloadValidationJmesPath` set every replay throws `IdempotencyValidationError`
 * (aws-powertools/powertools-lambda-typescript#5705, fixed after 2.35.0). The "Lambda context"
 * only tells it how long an execution may hold its in-progress record: 60 s, our default
 * `lockTimeout`.
 */
export function powertools<I, O>(
  options: PowertoolsOptions,
  handler: (input: I) => Promise<O>,
): Protected<I, O> {
  const config = new IdempotencyConfig({
    eventKeyJmesPath: 'idempotencyKey',
    expiresAfterSeconds: options.expiresAfterSeconds ?? 3600,
  })
  config.registerLambdaContext({ getRemainingTimeInMillis: () => 60_000 } as never)
  const persistenceStore = new CachePersistenceLayer({ client: options.client })
  const run = makeIdempotent(
    async (event: { idempotencyKey: string; input: I }) => handler(event.input),
    { persistenceStore, config, keyPrefix: options.keyPrefix },
  )
  return (call) => run({ idempotencyKey: call.key, input: call.input }) as Promise<O>
}

export interface NodeIdempotencyOptions {
  storage: StorageAdapter
  /** Prefix of every record key, so runs never meet. */
  cacheKeyPrefix: string
  /** Record lifetime in milliseconds. @default 86400000 */
  cacheTTLMS?: number
}

/**
 * @node-idempotency/core around `handler`, as its HTTP integrations use it: the key comes from
 * the `idempotency-key` header, the fingerprint from the body, the record key from method and
 * path; `onRequest` claims or answers, `onResponse` records.
 */
export function nodeIdempotency<I, O>(
  options: NodeIdempotencyOptions,
  handler: (input: I) => Promise<O>,
): Protected<I, O> {
  const idempotency = new NodeIdempotency(options.storage, {
    cacheKeyPrefix: options.cacheKeyPrefix,
    cacheTTLMS: options.cacheTTLMS ?? 86_400_000,
  })
  return async (call) => {
    const request = {
      headers: { 'idempotency-key': call.key },
      method: 'POST',
      path: '/orders.create',
      body: call.input as Record<string, unknown>,
    }
    const recorded = await idempotency.onRequest(request)
    if (recorded !== undefined) return recorded.body as O
    const value = await handler(call.input)
    await idempotency.onResponse(request, { body: value })
    return value
  }
}
