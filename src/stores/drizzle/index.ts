export { createDrizzleStore } from './create'
export { createMySqlTableStatements } from './mysql/sql'
export type {
  DrizzleMySqlDatabase,
  DrizzleMySqlStore,
  DrizzleMySqlStoreOptions,
} from './mysql/store'
export {
  defineMySqlIdempotencyTable,
  type MySqlIdempotencyTable,
  mysqlIdempotencyKeys,
} from './mysql/table'
export { createTableStatements } from './postgres/sql'
export type {
  DrizzlePgDatabase,
  DrizzleStore,
  DrizzleStoreOptions,
  DrizzleTransactionOf,
} from './postgres/store'
export { createSQLiteTableStatements } from './sqlite/sql'
export type {
  DrizzleSQLiteDatabase,
  DrizzleSQLiteStore,
  DrizzleSQLiteStoreOptions,
} from './sqlite/store'
export {
  defineSQLiteIdempotencyTable,
  type SQLiteIdempotencyTable,
  sqliteIdempotencyKeys,
} from './sqlite/table'
export {
  defaultIdempotencyTableName,
  defineIdempotencyTable,
  type IdempotencyTable,
  idempotencyKeys,
} from './table'
export { TransactionalModeUnsupportedError } from './unsupported'
