import type { LuaScript } from './scripts'

/**
 * The part of an `ioredis` client (`Redis` or `Cluster`) the store uses. Structural, so the store
 * never loads ioredis itself: it is an optional peer.
 */
export interface IoRedisClientLike {
  evalsha(sha1: string, numberOfKeys: number, ...keysAndArguments: string[]): Promise<unknown>
  eval(script: string, numberOfKeys: number, ...keysAndArguments: string[]): Promise<unknown>
  /** ioredis' connection state: `'wait' | 'connecting' | 'connect' | 'ready' | 'reconnecting' | …` */
  readonly status?: string | undefined
}

/** The arguments node-redis takes for `EVAL` and `EVALSHA`. */
export interface NodeRedisEvalOptions {
  keys: string[]
  arguments: string[]
}

/**
 * The part of a node-redis (4, 5 or 6) client (`createClient()` or `createCluster()`) the store uses.
 * Structural, so the store never loads `redis` itself: it is an optional peer.
 */
export interface NodeRedisClientLike {
  evalSha(sha1: string, options: NodeRedisEvalOptions): Promise<unknown>
  eval(script: string, options: NodeRedisEvalOptions): Promise<unknown>
  /** node-redis: true once connected and ready; false while connecting, reconnecting or closed. */
  readonly isReady?: boolean | undefined
}

/** A connected `ioredis` (5 or 6) or node-redis (4, 5 or 6) client; which one is told apart by its methods. */
export type RedisClientLike = IoRedisClientLike | NodeRedisClientLike

/**
 * Thrown, before anything is sent, when the client itself reports that it is not connected
 * (see `requireReady`). The engine turns it into `STORE_UNAVAILABLE` (503), fail closed.
 */
export class RedisNotReadyError extends Error {
  override name = 'RedisNotReadyError'
  readonly code = 'REDIS_NOT_READY'
  constructor(state: string) {
    super(
      `idempotent-mutations: the Redis client is not connected (${state}), so the call was not sent. ` +
        'Wait for the client to be ready before serving requests.',
    )
  }
}

/** Runs the store's scripts on one client, whichever library it comes from. */
export interface ScriptRunner {
  readonly library: 'ioredis' | 'node-redis'
  /** Runs `script` on its one key (every script touches exactly one record). */
  run(script: LuaScript, key: string, args: string[]): Promise<unknown>
}

export function invalidArgument(message: string, code = 'ERR_INVALID_ARG_VALUE'): TypeError {
  return Object.assign(new TypeError(`idempotent-mutations: ${message}`), { code })
}

// `wait` is ioredis' lazyConnect state: the first command opens the connection, so it may pass.
const ioredisUsable = new Set(['ready', 'wait'])

export function createScriptRunner(client: unknown, requireReady: boolean): ScriptRunner {
  if (client === null || typeof client !== 'object') {
    throw invalidArgument(
      'createRedisStore needs a connected ioredis (5 or 6) or node-redis (4, 5 or 6) client',
      'ERR_INVALID_ARG_TYPE',
    )
  }
  const candidate = client as Partial<IoRedisClientLike & NodeRedisClientLike>

  // node-redis 4 in `legacyMode` has callback-style lowercase commands (`evalsha`, `eval`, which
  // answer undefined) and its promise commands under `v4`: without this it would pass for ioredis
  // and fail every call after sending it.
  if ((client as { options?: { legacyMode?: unknown } }).options?.legacyMode === true) {
    const modern = (client as { v4?: Partial<NodeRedisClientLike> }).v4
    if (typeof modern?.evalSha !== 'function' || typeof modern.eval !== 'function') {
      throw invalidArgument(
        'createRedisStore got a node-redis client in legacyMode without its `v4` commands',
        'ERR_INVALID_ARG_TYPE',
      )
    }
    return nodeRedisRunner(
      modern as NodeRedisClientLike,
      client as NodeRedisClientLike,
      requireReady,
    )
  }

  // node-redis 5's `client.legacy()` wrapper: callback-style commands (its `evalSha` answers
  // undefined) and no promise API to fall back on; it would pass for node-redis and fail every
  // call after sending it. Told apart by its shape, which survives minification: commands and
  // `sendCommand`, but none of a client's connection state (`isOpen`, `isReady`, `status`).
  if (isNodeRedisLegacyWrapper(client)) {
    throw invalidArgument(
      'createRedisStore needs the node-redis client itself, not its legacy() wrapper',
      'ERR_INVALID_ARG_TYPE',
    )
  }

  if (typeof candidate.evalsha === 'function' && typeof candidate.eval === 'function') {
    const io = client as IoRedisClientLike
    return {
      library: 'ioredis',
      run(script, key, args) {
        if (requireReady && typeof io.status === 'string' && !ioredisUsable.has(io.status)) {
          return Promise.reject(new RedisNotReadyError(`ioredis status '${io.status}'`))
        }
        return io
          .evalsha(script.sha1, 1, key, ...args)
          .catch((error: unknown) => orEval(error, () => io.eval(script.source, 1, key, ...args)))
      },
    }
  }

  if (typeof candidate.evalSha === 'function' && typeof candidate.eval === 'function') {
    const nodeRedis = client as NodeRedisClientLike
    return nodeRedisRunner(nodeRedis, nodeRedis, requireReady)
  }

  throw invalidArgument(
    'createRedisStore needs an ioredis (5 or 6) client (with evalsha/eval) or a node-redis (4, 5 or 6) client (with evalSha/eval)',
    'ERR_INVALID_ARG_TYPE',
  )
}

function isNodeRedisLegacyWrapper(client: object): boolean {
  const candidate = client as Record<string, unknown>
  return (
    typeof candidate.sendCommand === 'function' &&
    typeof candidate.evalSha === 'function' &&
    !('isOpen' in candidate) &&
    !('isReady' in candidate) &&
    !('status' in candidate)
  )
}

/** Runs scripts through node-redis `commands`; `state` is the client whose `isReady` counts. */
function nodeRedisRunner(
  commands: NodeRedisClientLike,
  state: NodeRedisClientLike,
  requireReady: boolean,
): ScriptRunner {
  return {
    library: 'node-redis',
    run(script, key, args) {
      if (requireReady && state.isReady === false) {
        return Promise.reject(new RedisNotReadyError('node-redis isReady is false'))
      }
      const options = { keys: [key], arguments: args }
      return commands
        .evalSha(script.sha1, options)
        .catch((error: unknown) => orEval(error, () => commands.eval(script.source, options)))
    },
  }
}

/**
 * `EVALSHA` first: the script body is sent only when the server does not know it yet (after a
 * restart, a failover to a replica, `SCRIPT FLUSH`, or on a cluster node seen for the first
 * time). `NOSCRIPT` means nothing ran, so running the same call as `EVAL` is safe, and `EVAL`
 * leaves the script cached on that server for the next `EVALSHA`.
 */
function orEval(error: unknown, evalSource: () => Promise<unknown>): Promise<unknown> {
  if (!isNoScript(error)) throw error
  return evalSource()
}

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT')
}
