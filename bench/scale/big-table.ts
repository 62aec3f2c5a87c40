/**
 * Part 1, a big table: first executions (claim + complete) on a table of millions of records
 * against the same on empty tables, one caller at a time and 16 at once; what a record takes
 * on disk; which statement uses each column and index. Part 3, the statements per operation,
 * is counted here too.
 */
import type { Library } from '../lib/build'
import type { PgDatabase } from '../lib/database'
import { type Budget, byName, compare, ratio, round, type VariantStats } from '../lib/measure'
import { type TableUsage, usageOf } from './plans'
import { sizeOf, type TableSize, vacuum, type Writes, writesOf } from './sizes'
import {
  createScaleTable,
  type LoadResult,
  loadRecords,
  type RecordShape,
  recordShape,
  type ScaleTable,
  seconds,
} from './tables'

export interface BigTableBudget {
  rows: number
  expiredFraction: number
  /** One caller at a time. */
  latency: Budget
  /** 16 callers at once (the budget's `concurrency`). */
  concurrent: Budget
}

/** The variants' names, as the results show them. */
export const variants = {
  empty: 'empty table',
  emptyAgain: 'empty table again (A/A)',
  analyzedEmpty: 'empty table, ANALYZEd while empty',
  big: 'big table',
} as const

export interface BigTableResult {
  load: LoadResult
  vacuumAnalyzeSeconds: number
  checkpointSeconds: number
  shape: RecordShape
  size: TableSize
  /** What uses each column and index. */
  usage: TableUsage
  statementsPerOp: { empty: number; big: number }
  /** The empty table's row writes: its first executions' inserts and completions. */
  writes: Writes
  latency: VariantStats[]
  concurrent: VariantStats[]
  ratios: {
    p50: number
    p99: number
    controlP50: number
    controlP99: number
    analyzedEmptyP50: number
    analyzedEmptyP99: number
    concurrentThroughput: number
    concurrentP99: number
    concurrentControlThroughput: number
  }
}

type Tables = Record<keyof typeof variants, ScaleTable>

/** The four tables, the big one loaded, vacuumed and analyzed, and the load's writes flushed. */
async function prepareTables(lib: Library, database: PgDatabase, budget: BigTableBudget) {
  const make = (name: string) => createScaleTable(lib, database, name)
  const tables: Tables = {
    empty: await make('empty'),
    emptyAgain: await make('empty_again'),
    analyzedEmpty: await make('analyzed_empty'),
    big: await make('big'),
  }
  const { big } = tables
  await big.firstExecution()
  const shape = await recordShape(database, big)
  const load = await loadRecords(database, big, budget.rows, budget.expiredFraction)
  const vacuumAnalyzeSeconds = await vacuum(database, big, true)
  // The load's writes reach the disk now, not in the middle of the measurements.
  const checkpointStartedAt = performance.now()
  await database.query('checkpoint')
  const checkpointSeconds = seconds(checkpointStartedAt)
  await vacuum(database, tables.analyzedEmpty, true)
  return { tables, shape, load, vacuumAnalyzeSeconds, checkpointSeconds }
}

/** SQL statements per first execution on `table`, counted by the drizzle logger. */
async function statementsPerFirstExecution(database: PgDatabase, table: ScaleTable) {
  const before = database.statements.count
  for (let i = 0; i < 50; i++) await table.firstExecution()
  return round((database.statements.count - before) / 50, 2)
}

/** First executions on each table, interleaved: one caller at a time, then 16 at once. */
async function measure(tables: Tables, budget: BigTableBudget) {
  const variant = (key: keyof Tables) => ({ name: variants[key], op: tables[key].firstExecution })
  const latency = await compare(
    [variant('empty'), variant('emptyAgain'), variant('analyzedEmpty'), variant('big')],
    { ...budget.latency, latencies: true },
  )
  const concurrent = await compare([variant('empty'), variant('emptyAgain'), variant('big')], {
    ...budget.concurrent,
    latencies: true,
  })
  return { latency, concurrent }
}

export async function benchBigTable(
  lib: Library,
  database: PgDatabase,
  url: string,
  budget: BigTableBudget,
): Promise<BigTableResult & { table: ScaleTable }> {
  const { tables, ...prepared } = await prepareTables(lib, database, budget)
  const { empty, big } = tables
  const usage = await usageOf(database, url, big)
  const statementsPerOp = {
    empty: await statementsPerFirstExecution(database, empty),
    big: await statementsPerFirstExecution(database, big),
  }
  const { latency, concurrent } = await measure(tables, budget)
  return {
    table: big,
    ...prepared,
    size: await sizeOf(database, big, 'after the latency runs'),
    usage,
    statementsPerOp,
    writes: await writesOf(database, empty),
    latency,
    concurrent,
    ratios: ratiosOf(latency, concurrent),
  }
}

function ratiosOf(latency: VariantStats[], concurrent: VariantStats[]): BigTableResult['ratios'] {
  const one = (name: string) => byName(latency, name)
  const many = (name: string) => byName(concurrent, name)
  const { empty, emptyAgain, analyzedEmpty, big } = variants
  return {
    p50: ratio(one(big).p50Ms, one(empty).p50Ms),
    p99: ratio(one(big).p99Ms, one(empty).p99Ms),
    controlP50: ratio(one(emptyAgain).p50Ms, one(empty).p50Ms),
    controlP99: ratio(one(emptyAgain).p99Ms, one(empty).p99Ms),
    analyzedEmptyP50: ratio(one(analyzedEmpty).p50Ms, one(empty).p50Ms),
    analyzedEmptyP99: ratio(one(analyzedEmpty).p99Ms, one(empty).p99Ms),
    concurrentThroughput: ratio(many(big).opsPerSecond, many(empty).opsPerSecond),
    concurrentP99: ratio(many(big).p99Ms, many(empty).p99Ms),
    concurrentControlThroughput: ratio(many(emptyAgain).opsPerSecond, many(empty).opsPerSecond),
  }
}
