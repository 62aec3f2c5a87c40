import { defaultReplayCacheOptions } from '../src/replay-cache'
import { parseStoredScope } from '../src/scope'
import type { RecordInspection } from '../src/store'
import { leaseIsLive } from '../src/stores/operator'
import { type Command, parseCommand, UsageError, usage } from './args'
import { type OpenedStore, openStore, SetupError } from './connect'

/** Where the CLI writes: stdout for results, stderr for errors. */
export interface Output {
  out(text: string): void
  err(text: string): void
}

/** Exit codes, as `--help` lists them. */
export const exitCodes = { done: 0, notDone: 1, usage: 2, storeFailed: 3 } as const

/** Runs one command line; resolves with the exit code. */
export async function runCli(
  argv: string[],
  env: NodeJS.ProcessEnv,
  output: Output,
): Promise<number> {
  let command: Command
  try {
    command = parseCommand(argv, env)
  } catch (error) {
    if (!(error instanceof UsageError)) throw error
    output.err(`idempotent-mutations: ${error.message}\nRun idempotent-mutations --help for usage.`)
    return exitCodes.usage
  }
  if (command.name === 'help') {
    // Asked for: the usage is the answer. No command at all: it is the error message.
    if (command.exitCode === 0) output.out(usage)
    else output.err(usage)
    return command.exitCode
  }

  let opened: OpenedStore
  try {
    opened = await openStore(command.store)
  } catch (error) {
    if (error instanceof SetupError || error instanceof TypeError) {
      output.err(`idempotent-mutations: ${error.message}`)
      return exitCodes.usage
    }
    output.err(`idempotent-mutations: could not connect to the store: ${messageOf(error)}`)
    return exitCodes.storeFailed
  }
  try {
    return await runCommand(command, opened, output)
  } catch (error) {
    const message = messageOf(error)
    // The CLI never creates the table: a missing one is most often another name or schema.
    const hint = /does not exist|doesn't exist|no such table/i.test(message)
      ? ` (is the table elsewhere? pass --table${opened.selfExpiring ? '' : ' and --schema'})`
      : ''
    output.err(`idempotent-mutations: the store failed: ${message}${hint}`)
    return exitCodes.storeFailed
  } finally {
    await opened.close().catch(() => {})
  }
}

async function runCommand(
  command: Exclude<Command, { name: 'help' }>,
  opened: OpenedStore,
  output: Output,
): Promise<number> {
  const { store } = opened
  const print = (json: unknown, text: string) =>
    output.out(command.json ? JSON.stringify(json, null, 2) : text)

  switch (command.name) {
    case 'inspect': {
      const record = await store.inspect(command.scope, command.key)
      if (record === undefined) {
        print(
          { found: false, scope: command.scope, key: command.key },
          `No record of key ${JSON.stringify(command.key)} ${scopeText(command.scope)} in ${opened.description}.\nA request with this key runs as new.`,
        )
        return exitCodes.notDone
      }
      print({ found: true, record: jsonRecord(record) }, recordText(record))
      return exitCodes.done
    }
    case 'release': {
      const result = await store.releaseKey(command.scope, command.key, { force: command.force })
      if (result.released) {
        print(
          { released: true, record: jsonRecord(result.record) },
          `Released key ${JSON.stringify(command.key)} ${scopeText(command.scope)}: it was ${statusText(result.record)}.\nThe next request with this key runs anew.${result.record.status === 'completed' ? `\n${replayCacheNote}` : ''}${leaseIsLive(result.record) ? '\nIts executor may still be running: its outcome will not be recorded.' : ''}`,
        )
        return exitCodes.done
      }
      if (result.reason === 'absent') {
        print(
          { released: false, reason: 'absent', scope: command.scope, key: command.key },
          `No record of key ${JSON.stringify(command.key)} ${scopeText(command.scope)}: nothing to release.`,
        )
        return exitCodes.notDone
      }
      const { record } = result
      print(
        { released: false, reason: result.reason, record: jsonRecord(record) },
        `Refused: key ${JSON.stringify(command.key)} is in progress under a live lease until ${time(record.lockedUntil!, record.now)}; its executor may still be running.\nWait for the lease to end, or pass --force (a retry then runs the operation again, and the running executor's outcome is not recorded).`,
      )
      return exitCodes.notDone
    }
    case 'sweep': {
      const swept = await store.sweep({
        limit: command.limit,
        batchSize: command.batchSize,
        pause: command.pauseMs,
      })
      print(
        { swept },
        opened.selfExpiring
          ? `Swept ${swept} records: Redis deletes expired records itself.`
          : `Swept ${swept} expired ${swept === 1 ? 'record' : 'records'} from ${opened.description}.`,
      )
      return exitCodes.done
    }
  }
}

const replayCacheNote = `Processes that copied it into their replay cache may replay that copy for up to replayCache.maxAge (${defaultReplayCacheOptions.maxAge} by default).`

/** The record as `--json` prints it: the times as ISO 8601, and the scope read back. */
function jsonRecord(record: RecordInspection) {
  const iso = (at: number | undefined) =>
    at === undefined ? undefined : new Date(at).toISOString()
  return {
    ...record,
    ...parseStoredScope(record.scope),
    lockedUntil: iso(record.lockedUntil),
    expiresAt: iso(record.expiresAt),
    now: iso(record.now),
    leaseLive: leaseIsLive(record),
    expired: record.expiresAt <= record.now,
  }
}

function scopeText(stored: string): string {
  const parsed = parseStoredScope(stored)
  if (parsed === undefined) return `under stored scope ${JSON.stringify(stored)}`
  const caller = parsed.scope === '' ? '' : `, scope ${JSON.stringify(parsed.scope)}`
  return `of operation ${JSON.stringify(parsed.operation)}${caller}`
}

function statusText(record: RecordInspection): string {
  if (record.expiresAt <= record.now) return `${record.status.replace('_', ' ')} and expired`
  if (record.status === 'completed') return 'completed'
  return leaseIsLive(record) ? 'in progress under a live lease' : 'in progress, its lease ended'
}

/** What a retry with the key gets now, as the engine would answer it. */
function retryText(record: RecordInspection): string {
  if (record.expiresAt <= record.now) return 'runs as new (the record expired; a sweep deletes it)'
  if (record.status === 'completed') {
    return record.responseBytes === null
      ? '422 RESPONSE_NOT_STORED (completed without a stored response); another payload: 422 KEY_REUSED'
      : 'the recorded response, replayed; another payload: 422 KEY_REUSED'
  }
  if (leaseIsLive(record)) {
    const seconds = Math.max(1, Math.ceil((record.lockedUntil! - record.now) / 1000))
    return `409 IN_PROGRESS (Retry-After ${seconds}), until the lease ends`
  }
  return 'the same payload takes the key over and runs it again; another payload: 422 KEY_REUSED'
}

function recordText(record: RecordInspection): string {
  const parsed = parseStoredScope(record.scope)
  const rows: [string, string][] = [
    ['key', record.key],
    ...(parsed === undefined
      ? ([['stored scope', record.scope]] as [string, string][])
      : ([
          ['operation', parsed.operation],
          ['scope', parsed.scope === '' ? '(none)' : parsed.scope],
        ] as [string, string][])),
    ['status', statusText(record)],
    ...(record.lockedUntil === undefined
      ? []
      : ([['lease ends', time(record.lockedUntil, record.now)]] as [string, string][])),
    ['expires', time(record.expiresAt, record.now)],
    [
      'response',
      record.responseBytes === null
        ? record.status === 'completed'
          ? 'none stored'
          : 'none yet'
        : `${record.responseBytes} bytes`,
    ],
    ['fingerprint', record.fingerprint],
    ['a retry gets', retryText(record)],
  ]
  const width = Math.max(...rows.map(([label]) => label.length))
  return rows.map(([label, value]) => `${label.padEnd(width)}  ${value}`).join('\n')
}

/** `at` as ISO 8601, and how far it is from `now` (both on the store's clock). */
function time(at: number, now: number): string {
  const distance = duration(Math.abs(at - now))
  return `${new Date(at).toISOString()} (${at > now ? `in ${distance}` : `${distance} ago`})`
}

function duration(ms: number): string {
  const s = Math.round(ms / 1000)
  if (s < 60) return `${s}s`
  const m = Math.floor(s / 60)
  if (m < 60) return `${m}m ${s % 60}s`
  const h = Math.floor(m / 60)
  if (h < 48) return `${h}h ${m % 60}m`
  return `${Math.floor(h / 24)}d ${h % 24}h`
}

function messageOf(error: unknown): string {
  if (error instanceof AggregateError && error.errors.length > 0) {
    return error.errors.map(messageOf).join('; ')
  }
  if (error instanceof Error) {
    const cause = error.cause instanceof Error ? ` (${error.cause.message})` : ''
    return `${error.message || error.name}${cause}`
  }
  return String(error)
}
