import { type DirectStatement, placeholderNames } from './direct'

/**
 * PGlite parses and plans every statement it is sent: it has no prepared statements that outlive
 * one call, so the claim, the largest statement of the store, cost it about seven times a
 * `select 1`. A PL/pgSQL function keeps the plans of its statements for the session, and PGlite
 * is one session. So on PGlite the claim's statements and the completion run as functions in `pg_temp`
 * (created on first use, gone when the PGlite instance closes, nothing written to your schema),
 * and each call parses only `select * from pg_temp.<name>($1, …)`: about a third of the time.
 */

/** What the store uses of a PGlite transaction (`client.transaction(async (tx) => …)`). */
export interface PGliteTransaction {
  query<Row>(
    text: string,
    params?: unknown[],
    options?: { rowMode?: 'array' | 'object' },
  ): Promise<{ rows: Row[] }>
}

/** What the store uses of a PGlite instance. */
export interface PGliteClient extends PGliteTransaction {
  exec(text: string): Promise<unknown>
}

/** A store statement as a `pg_temp` function (see {@link pgliteFunction}). */
export interface PGliteFunction extends DirectStatement {
  /** Creates the function if it is not there yet (on the instance itself, outside any transaction). */
  ensure(): Promise<void>
  /** Forgets that it was created (`DISCARD TEMP` dropped it): the next `ensure()` creates it. */
  forget(): void
  /**
   * Calls it inside `transaction`, which must not be the one that creates it: call `ensure()`
   * before the transaction begins (PGlite runs one transaction at a time, so the instance
   * itself cannot create it while the transaction is open).
   */
  runIn(transaction: PGliteTransaction, values: Record<string, unknown>): Promise<unknown[][]>
}

export interface QueryLogger {
  logQuery(query: string, params: unknown[]): void
}

/** The PGlite instance behind `drizzle(pglite)`, or undefined for any other driver. */
export function pgliteClientOf(db: object): PGliteClient | undefined {
  const client = (db as { $client?: Record<string, unknown> }).$client
  if (
    client &&
    typeof client === 'object' &&
    typeof client.query === 'function' &&
    typeof client.exec === 'function' &&
    typeof client.dumpDataDir === 'function'
  ) {
    return client as unknown as PGliteClient
  }
  return undefined
}

/**
 * The logger given to `drizzle(pglite, { logger })`, so statements the store sends past drizzle
 * are logged (and counted) as drizzle would log them. Undefined if drizzle keeps it elsewhere.
 */
export function drizzleLoggerOf(db: object): QueryLogger | undefined {
  const logger = (db as { session?: { logger?: Partial<QueryLogger> } }).session?.logger
  return typeof logger?.logQuery === 'function' ? (logger as QueryLogger) : undefined
}

const argumentTypes: Record<string, string> = {
  scope: 'text',
  key: 'text',
  fingerprint: 'text',
  leaseToken: 'text',
  response: 'text',
  lockTimeoutMs: 'float8',
  ttlMs: 'float8',
  lockWait: 'text',
}

/** `DISCARD TEMP` (or `DISCARD ALL`) by other code on the same instance dropped a function. */
export const isUndefinedFunction = (error: unknown) =>
  (error as { code?: unknown }).code === '42883'

/** The functions made on each PGlite instance: `DISCARD TEMP` drops them all at once. */
const functionsOf = new WeakMap<PGliteClient, Set<PGliteFunction>>()

/** Forgets every function made on `client`, after a call found one dropped. */
export function forgetFunctionsOf(client: PGliteClient): void {
  for (const fn of functionsOf.get(client) ?? []) fn.forget()
}

/** A claim statement (its rows are claim rows, plus `extra` columns) as a `pg_temp` function. */
export function pgliteClaimFunction(
  client: PGliteClient,
  logger: QueryLogger | undefined,
  name: string,
  statement: { sql: string; params: unknown[] },
  extra = '',
): PGliteFunction {
  return pgliteFunction(
    client,
    logger,
    name,
    statement,
    `table(state integer, fingerprint text, status text, response text, lease_token text,
      locked_until float8, expires_at float8, now float8${extra})`,
    (text) => `begin\n  return query ${text};\nend`,
  )
}

/**
 * A statement of the store as a `pg_temp` function. `statement` is drizzle's `toSQL()` of it:
 * its `$n` are the function's arguments in the same order, so the text goes in unchanged.
 * `returns` is the function's result type and `body(statement)` its PL/pgSQL body.
 */
export function pgliteFunction(
  client: PGliteClient,
  logger: QueryLogger | undefined,
  name: string,
  statement: { sql: string; params: unknown[] },
  returns: string,
  body: (sql: string) => string,
): PGliteFunction {
  const names = placeholderNames(statement)
  const types = names.map((argument) => {
    const type = argumentTypes[argument]
    if (type === undefined) {
      throw new Error(`idempotent-mutations: no PGlite argument type for placeholder ${argument}`)
    }
    return type
  })
  const create = `create or replace function pg_temp.${name}(${types.join(', ')})
returns ${returns} language plpgsql volatile as $idempotent_mutations$
#variable_conflict use_column
${body(statement.sql)}
$idempotent_mutations$`
  const call = `select * from pg_temp.${name}(${names.map((_, i) => `$${i + 1}`).join(', ')})`
  let created: Promise<unknown> | undefined
  const ensure = async () => {
    created ??= client.exec(create).catch((error: unknown) => {
      created = undefined
      throw error
    })
    await created
  }
  const paramsOf = (values: Record<string, unknown>) => {
    const params = names.map((argument) => values[argument])
    logger?.logQuery(statement.sql, params)
    return params
  }

  const fn: PGliteFunction = {
    ensure,
    forget() {
      created = undefined
    },
    async run(values) {
      const params = paramsOf(values)
      for (let attempt = 0; ; attempt++) {
        await ensure()
        try {
          return (await client.query<unknown[]>(call, params, { rowMode: 'array' })).rows
        } catch (error) {
          // Create them again (the others were dropped too), and retry this one once.
          if (attempt > 0 || !isUndefinedFunction(error)) throw error
          forgetFunctionsOf(client)
        }
      }
    },
    async runIn(transaction, values) {
      return (await transaction.query<unknown[]>(call, paramsOf(values), { rowMode: 'array' })).rows
    },
  }
  const family = functionsOf.get(client) ?? new Set<PGliteFunction>()
  functionsOf.set(client, family)
  family.add(fn)
  return fn
}
