export {
  createDrizzleStore,
  createTableStatements,
  type DrizzlePgDatabase,
  type DrizzleStore,
  type DrizzleStoreOptions,
} from './store'
export {
  defaultIdempotencyTableName,
  defineIdempotencyTable,
  type IdempotencyTable,
  idempotencyKeys,
} from './table'
