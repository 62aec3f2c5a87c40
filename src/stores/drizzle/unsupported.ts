/**
 * What transactional mode on a MySQL or SQLite store throws: it keeps the record in your
 * transaction on PostgreSQL only. Thrown when an engine with `transactional: true` (or an
 * adapter's option) reads the store's `transaction`, so at construction, not on a request.
 */
export class TransactionalModeUnsupportedError extends Error {
  override name = 'TransactionalModeUnsupportedError'
  readonly code = 'TRANSACTIONAL_UNSUPPORTED'
  constructor(readonly dialect: 'mysql' | 'sqlite') {
    super(
      `idempotent-mutations: transactional mode keeps the record in your database transaction on PostgreSQL only; the Drizzle store on ${dialect === 'mysql' ? 'MySQL/MariaDB' : 'SQLite'} records outcomes in statements of their own. Leave transactional off for this store (see docs/drizzle-dialects.md)`,
    )
  }
}

/**
 * Gives `store` a `transaction` that throws {@link TransactionalModeUnsupportedError} when read.
 * The engine refuses transactional mode for a store whose `transaction` is not a function, and
 * reads it to find out: this makes that refusal say why. Not enumerable, so spreading or
 * printing the store reads nothing.
 */
export function refuseTransactions<TStore extends object>(
  store: TStore,
  dialect: 'mysql' | 'sqlite',
): TStore & { readonly transaction?: never } {
  return Object.defineProperty(store, 'transaction', {
    enumerable: false,
    get: () => {
      throw new TransactionalModeUnsupportedError(dialect)
    },
  })
}
