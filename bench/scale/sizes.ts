/** What a records table takes on disk, and the housekeeping that keeps it so. */
import type { PgDatabase } from '../lib/database'
import { round } from '../lib/measure'
import { type ScaleTable, seconds } from './tables'

export interface TableSize {
  /** When it was measured (a step of the run). */
  step: string
  rows: number
  /** `pg_relation_size`: the heap's main fork. */
  heapBytes: number
  /** `pg_indexes_size`: every index of the table. */
  indexBytes: number
  /** Each index's own size. */
  indexes: Record<string, number>
  /** `pg_total_relation_size`: heap, indexes, TOAST, free space and visibility maps. */
  totalBytes: number
  bytesPerRecord: { heap: number; indexes: number; total: number }
}

export async function sizeOf(
  database: PgDatabase,
  table: ScaleTable,
  step: string,
): Promise<TableSize> {
  const [row] = await database.query<Record<string, string>>(
    `select (select count(*) from ${table.qualified}) as rows,
      pg_relation_size($1::regclass) as heap, pg_indexes_size($1::regclass) as indexes,
      pg_total_relation_size($1::regclass) as total`,
    [table.qualified],
  )
  const rows = Number(row!.rows)
  const per = (bytes: number) => (rows === 0 ? Number.NaN : round(bytes / rows, 1))
  const heapBytes = Number(row!.heap)
  const indexBytes = Number(row!.indexes)
  const totalBytes = Number(row!.total)
  const indexes = Object.fromEntries(
    (await indexesOf(database, table)).map((index) => [index.name, index.bytes]),
  )
  return {
    step,
    rows,
    heapBytes,
    indexBytes,
    indexes,
    totalBytes,
    bytesPerRecord: { heap: per(heapBytes), indexes: per(indexBytes), total: per(totalBytes) },
  }
}

export interface IndexSize {
  name: string
  bytes: number
  definition: string
}

export async function indexesOf(database: PgDatabase, table: ScaleTable): Promise<IndexSize[]> {
  const rows = await database.query<{ name: string; bytes: string; definition: string }>(
    `select c.relname as name, pg_relation_size(c.oid) as bytes,
      pg_get_indexdef(i.indexrelid) as definition
    from pg_index i join pg_class c on c.oid = i.indexrelid
    where i.indrelid = $1::regclass order by c.relname`,
    [table.qualified],
  )
  return rows.map((r) => ({ name: r.name, bytes: Number(r.bytes), definition: r.definition }))
}

/** The table's columns, in order. */
export async function columnsOf(database: PgDatabase, table: ScaleTable): Promise<string[]> {
  const rows = await database.query<{ name: string }>(
    `select attname as name from pg_attribute
    where attrelid = $1::regclass and attnum > 0 and not attisdropped order by attnum`,
    [table.qualified],
  )
  return rows.map((r) => r.name)
}

/** `VACUUM` (with `ANALYZE` if asked) of the table; resolves with its seconds. */
export async function vacuum(
  database: PgDatabase,
  table: ScaleTable,
  analyze = false,
): Promise<number> {
  const startedAt = performance.now()
  await database.query(`vacuum ${analyze ? '(analyze) ' : ''}${table.qualified}`)
  return seconds(startedAt)
}

export interface VacuumState {
  deadTuples: number
  lastVacuum: string | null
  lastAutovacuum: string | null
  /** The planner's statistics in pg_class. */
  relpages: number
  reltuples: number
}

/**
 * The table's dead rows and vacuums from pg_stat_user_tables (the cumulative statistics, which
 * the backends report within a second or so) and its statistics in pg_class.
 */
export async function vacuumState(database: PgDatabase, table: ScaleTable): Promise<VacuumState> {
  const [row] = await database.query<Record<string, string | null>>(
    `select s.n_dead_tup as dead, s.last_vacuum::text as vacuum,
      s.last_autovacuum::text as autovacuum, c.relpages, c.reltuples
    from pg_class c left join pg_stat_user_tables s on s.relid = c.oid
    where c.oid = $1::regclass`,
    [table.qualified],
  )
  return {
    deadTuples: Number(row?.dead ?? 0),
    lastVacuum: row?.vacuum ?? null,
    lastAutovacuum: row?.autovacuum ?? null,
    relpages: Number(row?.relpages),
    reltuples: Number(row?.reltuples),
  }
}

export interface Writes {
  inserted: number
  updated: number
  /** Updates that wrote no index entry (heap-only tuples). */
  hotUpdated: number
}

/** Rows the table has had inserted and updated, from the cumulative statistics. */
export async function writesOf(database: PgDatabase, table: ScaleTable): Promise<Writes> {
  const [row] = await database.query<Record<string, string>>(
    `select n_tup_ins as inserted, n_tup_upd as updated, n_tup_hot_upd as hot
    from pg_stat_user_tables where relid = $1::regclass`,
    [table.qualified],
  )
  return {
    inserted: Number(row?.inserted),
    updated: Number(row?.updated),
    hotUpdated: Number(row?.hot),
  }
}
