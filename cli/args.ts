import { parseArgs } from 'node:util'
import { toMilliseconds } from '../src/duration'
import { storedScope } from '../src/scope'

/** Where the store is, from the environment and the options. */
export interface StoreLocation {
  databaseUrl: string | undefined
  redisUrl: string | undefined
  /** The records table (SQL stores). */
  table: string | undefined
  /** The table's PostgreSQL schema. */
  schema: string | undefined
  /** The Redis key prefix. */
  prefix: string | undefined
}

export type Command =
  /** `exitCode` 2 when no command was given. */
  | { name: 'help'; exitCode: 0 | 2 }
  | { name: 'inspect'; scope: string; key: string; store: StoreLocation; json: boolean }
  | {
      name: 'release'
      scope: string
      key: string
      force: boolean
      store: StoreLocation
      json: boolean
    }
  | {
      name: 'sweep'
      limit: number | undefined
      batchSize: number | undefined
      /** Milliseconds between two batches. */
      pauseMs: number | undefined
      store: StoreLocation
      json: boolean
    }

/** A command line the CLI cannot run as given (exit code 2). */
export class UsageError extends Error {
  override name = 'UsageError'
}

export const usage = `Usage: idempotent-mutations <command> [options]

Commands:
  inspect <key>    Show the record of one key: status, lease, expiry, response size,
                   and what a retry gets now.
  release <key>    Delete the record of one key, so its next request runs anew. Refused
                   while an executor holds a live lease, unless --force.
  sweep            Delete the records past their expiry (Redis expires them itself).

Which record (inspect, release):
  --operation <name>     The operation: the tRPC procedure path (orders.create), the GraphQL
                         mutation's root fields (createOrder, or a,b for several), the HTTP
                         route (POST /orders), or execute()'s \`operation\`.
  --scope <scope>        The caller scope your \`scope\` option returned (none by default).
  --stored-scope <text>  The stored scope string itself, instead of --operation and --scope.

Where the records are (one of these variables):
  DATABASE_URL     postgres://… (with postgres or pg installed), mysql://… (mysql2),
                   file:… or libsql://… (@libsql/client; better-sqlite3 for file:).
                   Needs drizzle-orm.
  REDIS_URL        redis://… or rediss://… (with ioredis or redis installed).
  --table <name>   The records table (default idempotency_keys).
  --schema <name>  The table's PostgreSQL schema.
  --prefix <text>  The Redis key prefix (default idem:).

Options:
  --force            release: also while a lease is live (its executor may still be running).
  --limit <n>        sweep: stop after n records.
  --batch-size <n>   sweep: records per statement (default 1000).
  --pause <time>     sweep: wait between two statements, like 150ms (default none), to
                     leave the database to the requests it serves meanwhile.
  --json             Print JSON.
  -h, --help         Show this help.

Exit codes: 0 found or done, 1 not found or refused, 2 usage or setup error, 3 the store failed.`

const options = {
  operation: { type: 'string' },
  scope: { type: 'string' },
  'stored-scope': { type: 'string' },
  table: { type: 'string' },
  schema: { type: 'string' },
  prefix: { type: 'string' },
  force: { type: 'boolean' },
  limit: { type: 'string' },
  'batch-size': { type: 'string' },
  pause: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const

/** The command `argv` (without node and the script) asks for, with `env`'s store URLs. */
export function parseCommand(argv: string[], env: NodeJS.ProcessEnv): Command {
  let parsed: ReturnType<typeof parseArgs<{ options: typeof options; allowPositionals: true }>>
  try {
    parsed = parseArgs({ args: argv, options, allowPositionals: true, strict: true })
  } catch (error) {
    throw new UsageError((error as Error).message)
  }
  const { values, positionals } = parsed
  const [name, ...rest] = positionals
  if (values.help || name === 'help') return { name: 'help', exitCode: 0 }
  if (name === undefined) return { name: 'help', exitCode: 2 }
  const json = values.json === true
  const store: StoreLocation = {
    databaseUrl: env.DATABASE_URL || undefined,
    redisUrl: env.REDIS_URL || undefined,
    table: values.table,
    schema: values.schema,
    prefix: values.prefix,
  }
  if (store.databaseUrl === undefined && store.redisUrl === undefined) {
    throw new UsageError('set DATABASE_URL or REDIS_URL to where the records are')
  }
  if (store.databaseUrl !== undefined && store.redisUrl !== undefined) {
    throw new UsageError(
      'both DATABASE_URL and REDIS_URL are set: unset the one your idempotency store does not use',
    )
  }
  const refuse = (option: string, command: string) => {
    throw new UsageError(`${option} is an option of ${command} only`)
  }

  switch (name) {
    case 'inspect':
    case 'release': {
      const key = only(rest, name)
      if (values.limit !== undefined) refuse('--limit', 'sweep')
      if (values['batch-size'] !== undefined) refuse('--batch-size', 'sweep')
      if (values.pause !== undefined) refuse('--pause', 'sweep')
      if (name === 'inspect' && values.force) refuse('--force', 'release')
      const scope = scopeOf(values)
      return name === 'inspect'
        ? { name, scope, key, store, json }
        : { name, scope, key, force: values.force === true, store, json }
    }
    case 'sweep': {
      if (rest.length > 0) throw new UsageError(`sweep takes no argument (got ${rest.join(' ')})`)
      for (const option of ['operation', 'scope', 'stored-scope', 'force'] as const) {
        if (values[option] !== undefined) refuse(`--${option}`, 'inspect and release')
      }
      return {
        name,
        limit: count(values.limit, '--limit', 0),
        batchSize: count(values['batch-size'], '--batch-size', 1),
        pauseMs: duration(values.pause, '--pause'),
        store,
        json,
      }
    }
    default:
      throw new UsageError(`unknown command ${JSON.stringify(name)}: use inspect, release or sweep`)
  }
}

function only(rest: string[], command: string): string {
  if (rest.length !== 1) {
    throw new UsageError(
      rest.length === 0
        ? `${command} needs the key: idempotent-mutations ${command} <key> --operation <name>`
        : `${command} takes one key (got ${rest.length}: ${rest.join(' ')})`,
    )
  }
  return rest[0]!
}

function scopeOf(values: {
  operation?: string | undefined
  scope?: string | undefined
  'stored-scope'?: string | undefined
}): string {
  const stored = values['stored-scope']
  if (stored !== undefined) {
    if (values.operation !== undefined || values.scope !== undefined) {
      throw new UsageError('give --stored-scope alone, or --operation (and --scope), not both')
    }
    return stored
  }
  if (values.operation === undefined || values.operation === '') {
    throw new UsageError(
      'which operation? Records are kept per operation: pass --operation <name> (and --scope <scope> for a caller scope), or --stored-scope',
    )
  }
  return storedScope({ scope: values.scope, operation: values.operation })
}

function count(value: string | undefined, option: string, least: number): number | undefined {
  if (value === undefined) return undefined
  const number = Number(value)
  if (!/^[0-9]+$/.test(value) || !Number.isSafeInteger(number) || number < least) {
    throw new UsageError(`${option} must be an integer of at least ${least} (got ${value})`)
  }
  return number
}

function duration(value: string | undefined, option: string): number | undefined {
  if (value === undefined) return undefined
  try {
    return toMilliseconds(/^[0-9]+$/.test(value) ? Number(value) : value, option)
  } catch {
    throw new UsageError(
      `${option} must be a duration like 150ms, 2s or 500 (milliseconds) (got ${value})`,
    )
  }
}
