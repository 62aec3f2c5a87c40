/**
 * Connections of the scale bench beyond the pool of `openDatabase`: one for the sweep, one that
 * samples locks, and the ones the plan experiment prepares statements on. Each is its own
 * postgres.js client, named by `application_name` so pg_stat_activity tells them apart. None
 * creates or drops a schema: that stays with `openDatabase`, whose schema they work in.
 */
import { drizzle } from 'drizzle-orm/postgres-js'
import postgres from 'postgres'
import type { DrizzlePgDatabase } from '../../src/stores/drizzle'

export interface Connection {
  /** A drizzle database over this client, for a store of its own. */
  db: DrizzlePgDatabase
  /** Runs one statement (unnamed: these are the bench's own, not the store's). */
  query<Row = Record<string, unknown>>(text: string, params?: unknown[]): Promise<Row[]>
  /** The server process of its one connection (clients of one connection only). */
  pid(): Promise<number>
  close(): Promise<void>
}

/** `url` with `application_name` set, which postgres.js passes on as a connection parameter. */
export function withApplicationName(url: string, name: string): string {
  const named = new URL(url)
  named.searchParams.set('application_name', name)
  return named.toString()
}

/** A client of `max` connections (one unless told) named `name`. */
export function openConnection(url: string, name: string, max = 1): Connection {
  const client = postgres(withApplicationName(url, name), { max, onnotice: () => {} })
  return {
    db: drizzle({ client }),
    query: async <Row>(text: string, params: unknown[] = []) =>
      (await client.unsafe(text, params as never[], { prepare: false })) as unknown as Row[],
    pid: async () => {
      const [row] = await client.unsafe('select pg_backend_pid() as pid')
      return Number(row?.pid)
    },
    close: () => client.end({ timeout: 5 }),
  }
}
