export {
  type IoRedisClientLike,
  type NodeRedisClientLike,
  type NodeRedisEvalOptions,
  type RedisClientLike,
  RedisNotReadyError,
} from './client'
export {
  createRedisStore,
  defaultRedisPrefix,
  type RedisStore,
  type RedisStoreOptions,
} from './store'
