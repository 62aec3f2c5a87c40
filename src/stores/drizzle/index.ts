export { createTableStatements } from './postgres/sql'
export {
  createPostgresStore as createDrizzleStore,
  type DrizzlePgDatabase,
  type DrizzleStore,
  type DrizzleStoreOptions,
  type DrizzleTransactionOf,
} from './postgres/store'
export {
  defaultIdempotencyTableName,
  defineIdempotencyTable,
  type IdempotencyTable,
  idempotencyKeys,
} from './table'
