export {
  createDrizzleStore,
  createTableStatements,
  type DrizzlePgDatabase,
  type DrizzleStore,
  type DrizzleStoreOptions,
  type DrizzleTransactionOf,
} from './store'
export {
  defaultIdempotencyTableName,
  defineIdempotencyTable,
  type IdempotencyTable,
  idempotencyKeys,
} from './table'
