import {
  clientOf,
  parametersOf,
  type QueryLogger,
  type Row,
  type Statement,
  type StatementRunner,
} from '../runner'

/**
 * PGlite parses and plans every statement it is sent: it has no prepared statements that outlive
 * one call, so the claim, the largest statement of the store, cost it about seven times a
 * `select 1`. A PL/pgSQL function keeps the plans of its statements for the session, and PGlite
 * is one session. So on PGlite the statements that declare their result `columns` (the claim's
 * and the completion) run as functions in `pg_temp` (created on first use, gone when the PGlite
 * instance closes, nothing written to your schema), and each call parses only
 * `select * from pg_temp.<name>($1, …)`: about a third of the time. Other statements are sent
 * as they are.
 */

/** What the store uses of a PGlite transaction (`client.transaction(async (tx) => …)`). */
export interface PGliteTransaction {
  query<TRow>(
    text: string,
    params?: unknown[],
    options?: { rowMode?: 'array' | 'object' },
  ): Promise<{ rows: TRow[] }>
}

/** What the store uses of a PGlite instance. */
export interface PGliteClient extends PGliteTransaction {
  exec(text: string): Promise<unknown>
}

/** The PGlite instance behind `drizzle(pglite)`, or undefined for any other driver. */
export function pgliteClientOf(db: object): PGliteClient | undefined {
  const client = clientOf(db) as Record<string, unknown> | undefined
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

/** The PGlite transaction behind a drizzle transaction on PGlite. */
export function pgliteTransactionOf(connection: unknown): PGliteTransaction | undefined {
  const client = connection as Record<string, unknown> | undefined
  return client && typeof client.query === 'function' && typeof client.rollback === 'function'
    ? (client as unknown as PGliteTransaction)
    : undefined
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
const isUndefinedFunction = (error: unknown) => (error as { code?: unknown }).code === '42883'

/**
 * The functions created on each PGlite instance, by statement name: `DISCARD TEMP` drops them
 * all at once, so a call that finds one gone forgets them all.
 */
const createdOn = new WeakMap<PGliteClient, Map<string, Promise<unknown>>>()

function functionCall(statement: Statement): string {
  const args = statement.params.map((_, i) => `$${i + 1}`).join(', ')
  return `select * from pg_temp.${statement.name}(${args})`
}

// The statement's `$n` are the function's arguments in the same order, so its text goes in
// unchanged.
function functionDefinition(statement: Statement): string {
  const types = statement.params.map((field) => {
    const type = argumentTypes[field]
    if (type === undefined) {
      throw new Error(`idempotent-mutations: no PGlite argument type for placeholder ${field}`)
    }
    return type
  })
  return `create or replace function pg_temp.${statement.name}(${types.join(', ')})
returns table(${statement.columns}) language plpgsql volatile as $idempotent_mutations$
#variable_conflict use_column
begin
  return query ${statement.text};
end
$idempotent_mutations$`
}

/** The statements of one PGlite instance, and of the transactions on it. */
export interface PGliteRunner extends StatementRunner {
  /** Creates the functions of `statements`, on the instance itself, before a transaction begins. */
  ensure(statements: readonly Statement[]): Promise<void>
  /**
   * A runner inside `transaction`, whose functions were ensured before it began (PGlite runs
   * one transaction at a time, so the instance cannot create them while it is open).
   */
  within(transaction: PGliteTransaction): StatementRunner
}

export function pgliteRunner(client: PGliteClient, logger: QueryLogger | undefined): PGliteRunner {
  const created = createdOn.get(client) ?? new Map<string, Promise<unknown>>()
  createdOn.set(client, created)
  const ensure = async (statement: Statement) => {
    let creating = created.get(statement.name)
    if (creating === undefined) {
      creating = client.exec(functionDefinition(statement)).catch((error: unknown) => {
        created.delete(statement.name)
        throw error
      })
      created.set(statement.name, creating)
    }
    await creating
  }
  const send = async (target: PGliteTransaction, statement: Statement, params: unknown[]) => {
    const text = statement.columns === undefined ? statement.text : functionCall(statement)
    return (await target.query<Row>(text, params, { rowMode: 'array' })).rows
  }
  const paramsOf = (statement: Statement, values: object) => {
    const params = parametersOf(statement, values)
    logger?.logQuery(statement.text, params)
    return params
  }

  return {
    async run(statement, values) {
      const params = paramsOf(statement, values)
      if (statement.columns === undefined) return send(client, statement, params)
      for (let attempt = 0; ; attempt++) {
        await ensure(statement)
        try {
          return await send(client, statement, params)
        } catch (error) {
          // Create them again (the others were dropped too), and retry this one once.
          if (attempt > 0 || !isUndefinedFunction(error)) throw error
          created.clear()
        }
      }
    },
    async ensure(statements) {
      await Promise.all(statements.filter((s) => s.columns !== undefined).map(ensure))
    },
    within: (transaction) => ({
      run: (statement, values) =>
        send(transaction, statement, paramsOf(statement, values)).catch((error: unknown) => {
          // Dropped by DISCARD TEMP: this transaction is lost (it cannot create them), the
          // next one creates them before it begins.
          if (isUndefinedFunction(error)) created.clear()
          throw error
        }),
    }),
  }
}
