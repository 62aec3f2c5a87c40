/**
 * The engine's options: each documented once, with its `@default`; the defaults as a value
 * (`defaultIdempotencyOptions`, which test/readme/configuration.test.ts holds the docs and the
 * README to); and what an engine makes of them, checked once when it is created.
 */
import { type Codec, defaultCodec } from '../codec'
import { type Duration, toMilliseconds } from '../duration'
import { defaultReplayCacheOptions, ReplayCache, type ReplayCacheOptions } from '../replay-cache'
import { defaultStoreErrors } from '../settle'
import type { IdempotencyStore, SweepOptions } from '../store'
import { sweepOptionsOf } from '../stores/sweep'
import { createTelemetry, type Telemetry } from '../telemetry'
import { defaultTelemetryOptions, type TelemetryOptions } from '../telemetry/options'
import { boundOf } from './bounded'
import type { IdempotencyEvent, Logger } from './types'

const logPrefix = '[idempotent-mutations]'

export { defaultStoreErrors }

/** Writes warnings and errors to the console under a fixed prefix. */
export const defaultLogger: Logger = {
  warn: (message, ...details) => console.warn(`${logPrefix} ${message}`, ...details),
  error: (message, ...details) => console.error(`${logPrefix} ${message}`, ...details),
}

export interface IdempotencyOptions<TTransaction = unknown> {
  /** Where records live: `createMemoryStore()`, `createDrizzleStore(db)`, or your own. */
  store: IdempotencyStore<TTransaction>
  /** How long a completed record is replayed. @default '24h' */
  ttl?: Duration | undefined
  /** How long an executor holds its lease before the key may be taken over. @default '60s' */
  lockTimeout?: Duration | undefined
  /** Reject keyed mutations that arrive without a key (`KEY_REQUIRED`). @default false */
  required?: boolean | undefined
  /** What a duplicate of an in-flight operation gets: `'reject'` (409) or `'wait'`. @default 'reject' */
  concurrency?: 'reject' | 'wait' | undefined
  /** With `concurrency: 'wait'`, how long to wait for the in-flight one before 409. @default '10s' */
  waitTimeout?: Duration | undefined
  /** The `Retry-After` given with 409, capped at the time left on the lease. @default '1s' */
  retryAfter?: Duration | undefined
  /** What a claim does when the store is unreachable. @default 'fail-closed' */
  onStoreError?: 'fail-closed' | 'fail-open' | undefined
  /** Which thrown errors are recorded and replayed (true) instead of releasing the key. @default defaultStoreErrors */
  storeErrors?: ((error: unknown) => boolean) | undefined
  /** A larger encoded response is not stored; its retries get `RESPONSE_NOT_STORED`. @default 1048576 */
  maxResponseBytes?: number | undefined
  /** How outcomes become text and back. @default defaultCodec (superjson) */
  codec?: Codec | undefined
  /**
   * The clock for deadlines and events, in epoch ms. Stores with a server use its clock; the
   * memory store follows this one unless given its own, and a memory store that already follows
   * another engine's clock (another function, `Date.now` included) is refused with a TypeError.
   * @default Date.now
   */
  now?: (() => number) | undefined
  /** Called for each thing that happens to a keyed operation; errors it throws are logged, not raised. @default undefined */
  onEvent?: ((event: IdempotencyEvent) => void) | undefined
  /** Where diagnostics go. @default defaultLogger (console, prefixed) */
  logger?: Logger | undefined
  /** Run `store.sweep()` on this interval (unref'd timer); `false` to never. @default false */
  sweepInterval?: Duration | false | undefined
  /**
   * What the `sweepInterval` timer's sweeps pass to `store.sweep()` (`batchSize`, `limit`,
   * `pause`, `signal`), over the default field by field. The default is paced, since the timer
   * sweeps beside the requests the database serves (`npm run bench:scale`: a million expired
   * records swept while 16 callers ran cost them a tenth of their throughput, against two fifths
   * back to back); `pause: 0` sweeps back to back. `close()` stops a sweep that is running.
   * @default { batchSize: 2000, pause: '150ms' }
   */
  sweepOptions?: SweepOptions | undefined
  /**
   * How long a claim may wait for the store before it counts as unavailable (`onStoreError`
   * decides what then happens: 503 or running unprotected). Bounds the wait when a database
   * driver queues queries through an outage. A claim that still lands later leaves a lease no one
   * holds: retries get 409 until `lockTimeout` passes, then take the key over. In transactional
   * mode it bounds opening the transaction, and the claim statement gets it on top of its own
   * lock wait (`rejectAfter`, or `waitTimeout`). `false`: wait as long as the store takes.
   * @default '2s'
   */
  claimTimeout?: Duration | false | undefined
  /**
   * How long the first caller waits for its outcome to be recorded, and the bound of each attempt
   * to record it. When it passes, the caller gets its value anyway and the completion goes on in
   * the background, with a growing pause (at most 5 s), for as long as the lease lasts: retries
   * of the key get 409 meanwhile, and an outage shorter than the lease leaves no duplicate.
   * `false`: wait for every attempt as long as the store takes.
   * @default '1s'
   */
  completeTimeout?: Duration | false | undefined
  /**
   * How long releasing a key (after an unexpected error) may take. When it passes, the caller
   * gets its error, `store-error` (stage `release`) is reported, and the key stays in progress
   * until its lease ends (a release that lands later frees it then). In transactional mode it
   * bounds the ROLLBACK: the caller gets its error, and the database rolls the transaction back
   * when the connection goes. `false`: no bound.
   * @default '1s'
   */
  releaseTimeout?: Duration | false | undefined
  /**
   * Transactional mode: how long recording the outcome and the COMMIT may take. When it passes
   * before the COMMIT was sent, the transaction is rolled back and the caller gets 503
   * `STORE_UNAVAILABLE`; after, the outcome is unknown and the caller gets 503
   * `OUTCOME_UNKNOWN` (a retry with the same key learns it). `false`: no bound.
   * @default '3s'
   */
  commitTimeout?: Duration | false | undefined
  /**
   * Run every keyed operation in one database transaction with its record: claim, the
   * handler's writes (through `context.tx`) and the recorded outcome commit or roll back
   * together. Needs a store with `transaction()` (the Drizzle store); any other store is refused
   * here with a TypeError. A request's own `transactional` overrides it.
   * @default false
   */
  transactional?: boolean | undefined
  /**
   * Transactional mode with `concurrency: 'reject'`: how long a duplicate waits for the first
   * transaction (whose uncommitted record it cannot see) before it answers 409. A first
   * transaction that ends within it is replayed instead. `concurrency: 'wait'` waits up to
   * `waitTimeout` instead.
   * @default '100ms'
   */
  rejectAfter?: Duration | undefined
  /**
   * Keep copies of the completed records this process wrote or read, and answer later retries
   * of them (replay, or 422 for another payload) without a store round trip. A completed record
   * cannot change before it expires, and a copy never outlives its record (the time it has left
   * is what the store's clock said, counted on the engine's from before the store was asked)
   * nor `maxAge`. Not used in front of a store whose records
   * already live in this process (`inProcess`, the memory store). `false` turns it off: every
   * retry then reads the store.
   * @default { maxEntries: 1000, maxCharacters: 8388608, maxAge: '1m' }
   */
  replayCache?: ReplayCacheOptions | false | undefined
  /**
   * OpenTelemetry traces and metrics of keyed operations (docs/observability.md), through
   * `@opentelemetry/api` when it is installed: a span per keyed operation and counters and
   * histograms, recorded by the SDK your application registers, and nothing without one.
   * `tracerProvider` and `meterProvider` replace the global providers; `recordKeys: true` puts
   * keys on spans; `false` turns it all off.
   * @default { recordKeys: false }
   */
  telemetry?: TelemetryOptions | false | undefined
}

type OptionDefaults = {
  readonly [Name in Exclude<keyof IdempotencyOptions, 'store'>]-?: IdempotencyOptions[Name]
}

/**
 * The default of every option but `store`, as the engine applies it. Each option's `@default`
 * above says the same, and the README's configuration table shows it.
 */
export const defaultIdempotencyOptions = Object.freeze({
  ttl: '24h',
  lockTimeout: '60s',
  required: false,
  concurrency: 'reject',
  waitTimeout: '10s',
  retryAfter: '1s',
  onStoreError: 'fail-closed',
  storeErrors: defaultStoreErrors,
  maxResponseBytes: 1024 * 1024,
  codec: defaultCodec,
  /** `Date.now` as it is when an engine is created (fake timers replace it), not at import. */
  get now(): () => number {
    return Date.now
  },
  onEvent: undefined,
  logger: defaultLogger,
  sweepInterval: false,
  sweepOptions: Object.freeze({ batchSize: 2000, pause: '150ms' }),
  claimTimeout: '2s',
  completeTimeout: '1s',
  releaseTimeout: '1s',
  commitTimeout: '3s',
  transactional: false,
  rejectAfter: '100ms',
  replayCache: defaultReplayCacheOptions,
  telemetry: defaultTelemetryOptions,
} as const) satisfies OptionDefaults

/** The options as an engine uses them: defaults applied, durations in milliseconds. */
export interface ResolvedOptions<TTransaction = unknown> {
  readonly store: IdempotencyStore<TTransaction>
  readonly ttl: number
  readonly lockTimeout: number
  readonly required: boolean
  readonly concurrency: 'reject' | 'wait'
  readonly waitTimeout: number
  readonly retryAfter: number
  readonly onStoreError: 'fail-closed' | 'fail-open'
  readonly storeErrors: (error: unknown) => boolean
  readonly maxResponseBytes: number
  readonly codec: Codec
  readonly now: () => number
  readonly onEvent: ((event: IdempotencyEvent) => void) | undefined
  readonly logger: Logger
  /** Undefined: no sweep timer. */
  readonly sweepInterval: number | undefined
  /** Over the paced default, checked when the engine is created. */
  readonly sweepOptions: SweepOptions
  /** The bounds of store calls; undefined: no bound. */
  readonly claimTimeout: number | undefined
  readonly completeTimeout: number | undefined
  readonly releaseTimeout: number | undefined
  readonly commitTimeout: number | undefined
  readonly transactional: boolean
  readonly rejectAfter: number
  /** Undefined when turned off, or in front of a store in this process (`inProcess`). */
  readonly replayCache: ReplayCache | undefined
  /** Undefined when turned off, or when `@opentelemetry/api` is not installed. */
  readonly telemetry: Telemetry | undefined
}

/** Throws unless `store` can run transactional mode. */
export function assertTransactionalStore(store: IdempotencyStore<unknown>, where: string): void {
  if (typeof store.transaction !== 'function') {
    throw new TypeError(
      `idempotent-mutations: ${where} asks for transactional mode, which needs a store that keeps records in your database transaction (createDrizzleStore on PostgreSQL); this store has no transaction()`,
    )
  }
}

/**
 * Checks `options` and applies the defaults. Throws a TypeError for the first option it refuses;
 * it changes nothing, the store included.
 */
export function resolveOptions<TTransaction>(
  options: IdempotencyOptions<TTransaction>,
): ResolvedOptions<TTransaction> {
  const { store } = options
  if (!store || typeof store.claim !== 'function') {
    throw new TypeError('idempotent-mutations: createIdempotency needs a `store`')
  }
  if (options.now !== undefined && typeof options.now !== 'function') {
    throw new TypeError(
      'idempotent-mutations: createIdempotency `now` must be a function returning epoch milliseconds',
    )
  }
  const defaults = defaultIdempotencyOptions
  const transactional = options.transactional ?? defaults.transactional
  if (transactional) assertTransactionalStore(store, 'createIdempotency({ transactional: true })')
  const duration = (name: DurationOption) => toMilliseconds(options[name] ?? defaults[name], name)
  const bound = (name: BoundOption) => {
    const value = options[name] ?? defaults[name]
    return boundOf(value === false ? false : toMilliseconds(value, name))
  }
  const ttl = duration('ttl')
  const lockTimeout = duration('lockTimeout')
  const waitTimeout = duration('waitTimeout')
  const retryAfter = duration('retryAfter')
  const rejectAfter = duration('rejectAfter')
  const claimTimeout = bound('claimTimeout')
  const completeTimeout = bound('completeTimeout')
  const releaseTimeout = bound('releaseTimeout')
  const commitTimeout = bound('commitTimeout')
  // Built (so its options are checked) even in front of a store in this process, then not used.
  const replayCache =
    options.replayCache === false
      ? undefined
      : new ReplayCache(options.replayCache ?? defaults.replayCache)
  return {
    store,
    ttl,
    lockTimeout,
    required: options.required ?? defaults.required,
    concurrency: options.concurrency ?? defaults.concurrency,
    waitTimeout,
    retryAfter,
    onStoreError: options.onStoreError ?? defaults.onStoreError,
    storeErrors: options.storeErrors ?? defaults.storeErrors,
    maxResponseBytes: options.maxResponseBytes ?? defaults.maxResponseBytes,
    codec: options.codec ?? defaults.codec,
    now: options.now ?? defaults.now,
    onEvent: options.onEvent,
    logger: options.logger ?? defaults.logger,
    sweepInterval: bound('sweepInterval'),
    sweepOptions: pacedSweepOptions(options.sweepOptions),
    claimTimeout,
    completeTimeout,
    releaseTimeout,
    commitTimeout,
    transactional,
    rejectAfter,
    replayCache: store.inProcess === true ? undefined : replayCache,
    telemetry: createTelemetry(options.telemetry ?? defaults.telemetry, store),
  }
}

type DurationOption = 'ttl' | 'lockTimeout' | 'waitTimeout' | 'retryAfter' | 'rejectAfter'
type BoundOption =
  | 'claimTimeout'
  | 'completeTimeout'
  | 'releaseTimeout'
  | 'commitTimeout'
  | 'sweepInterval'

/**
 * `sweepOptions` over the paced default, field by field (a field left undefined keeps the
 * default's), once every store would accept them (a TypeError otherwise).
 */
function pacedSweepOptions(given: SweepOptions | undefined): SweepOptions {
  const paced = defaultIdempotencyOptions.sweepOptions
  const options = {
    ...given,
    batchSize: given?.batchSize ?? paced.batchSize,
    pause: given?.pause ?? paced.pause,
  }
  sweepOptionsOf(options)
  return options
}
