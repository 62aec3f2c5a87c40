/**
 * Part 4, a table analyzed while empty. Two tables made by `ensureTable()`, autovacuum off for
 * both: one never analyzed (as `ensureTable()` and a drizzle-kit migration leave it), one
 * ANALYZEd while empty (relpages = 0, reltuples = 0). The store runs first executions on each
 * over one connection, so its prepared statements have made their generic plans (after five
 * custom ones) while the tables were nearly empty; then both get `rows` records without an
 * ANALYZE, and the same store's first executions are timed again; then the second table is
 * ANALYZEd and timed once more. Alongside, each statement is prepared on a second connection
 * and explained at every step, as the sixth execution of a pooled connection would plan it.
 */
import type { Library } from '../lib/build'
import type { PgDatabase } from '../lib/database'
import { type Budget, compare, type VariantStats } from '../lib/measure'
import { type Connection, openConnection } from './connections'
import {
  type Explained,
  type Prepared,
  prepare,
  type StatementKind,
  storeStatements,
} from './plans'
import { vacuumState } from './sizes'
import { createScaleTable, insertRecords, type ScaleTable, writtenOverTtl } from './tables'

export interface EmptyPlansBudget {
  rows: number
  /** First executions on each table before the load (more than five: the generic plan). */
  warmup: number
  latency: Budget
}

/** The statements explained: the claim's first, and every statement that finds a row by key. */
const kinds: StatementKind[] = ['insertOrRead', 'complete', 'release', 'get', 'sweep']

export interface PlanStep {
  step: string
  tables: {
    table: string
    relpages: number
    reltuples: number
    plans: Partial<Record<StatementKind, Explained>>
  }[]
}

export interface EmptyPlansResult {
  rows: number
  steps: PlanStep[]
  /** Plans the store's own connection made for its statements (pg_prepared_statements). */
  storePlans: { table: string; kind: string; genericPlans: number; customPlans: number }[]
  afterLoad: VariantStats[]
  afterAnalyze: VariantStats[]
}

const names = { never: 'never_analyzed', analyzed: 'analyzed_while_empty' } as const

export async function benchEmptyPlans(
  lib: Library,
  database: PgDatabase,
  url: string,
  budget: EmptyPlansBudget,
): Promise<EmptyPlansResult> {
  const storeConnection = openConnection(url, `${database.schema}_plans_store`)
  const planner = openConnection(url, `${database.schema}_plans_explain`)
  try {
    const make = (name: string) => createScaleTable(lib, database, name, storeConnection.db)
    const tables = [await make(names.never), await make(names.analyzed)] as const
    for (const table of tables) {
      await database.query(`alter table ${table.qualified} set (autovacuum_enabled = false)`)
    }
    await database.query(`analyze ${tables[1].qualified}`)
    const prepared = await prepareAll(planner, database.schema, tables)
    const steps = [await explainStep(database, prepared, tables, 'empty', 6)]

    for (const table of tables) {
      for (let i = 0; i < budget.warmup; i++) await table.firstExecution()
    }
    for (const table of tables) {
      await insertRecords(database, table, budget.rows, writtenOverTtl(0.2))
    }
    steps.push(await explainStep(database, prepared, tables, `${budget.rows} rows, no ANALYZE`))
    const measure = () =>
      compare(
        tables.map((table) => ({ name: table.name, op: table.firstExecution })),
        { ...budget.latency, latencies: true },
      )
    const afterLoad = await measure()
    const storePlans = await plansOf(storeConnection, database.schema, tables)

    await database.query(`analyze ${tables[1].qualified}`)
    steps.push(await explainStep(database, prepared, tables, `ANALYZE of ${names.analyzed}`))
    const afterAnalyze = await measure()
    return { rows: budget.rows, steps, storePlans, afterLoad, afterAnalyze }
  } finally {
    await storeConnection.close()
    await planner.close()
  }
}

type Tables = readonly [ScaleTable, ScaleTable]

async function prepareAll(planner: Connection, schema: string, tables: Tables) {
  const prepared: Record<string, Partial<Record<StatementKind, Prepared>>> = {}
  for (const table of tables) {
    const statements = storeStatements(schema, table.name)
    prepared[table.name] = {}
    for (const kind of kinds) {
      const name = `${table.name}_${kind}`.toLowerCase()
      prepared[table.name]![kind] = await prepare(planner, name, statements[kind], table.name)
    }
  }
  return prepared
}

/** Each prepared statement explained `times` times (the last plan kept), with pg_class's figures. */
async function explainStep(
  database: PgDatabase,
  prepared: Awaited<ReturnType<typeof prepareAll>>,
  tables: Tables,
  step: string,
  times = 1,
): Promise<PlanStep> {
  const result: PlanStep = { step, tables: [] }
  for (const table of tables) {
    const plans: Partial<Record<StatementKind, Explained>> = {}
    for (const kind of kinds) {
      for (let i = 0; i < times; i++) plans[kind] = await prepared[table.name]![kind]!.explain()
    }
    const { relpages, reltuples } = await vacuumState(database, table)
    result.tables.push({ table: table.name, relpages, reltuples, plans })
  }
  return result
}

/** The store's statements prepared on `connection`, and how often each was planned generic. */
async function plansOf(connection: Connection, schema: string, tables: Tables) {
  const rows = await connection.query<{ statement: string; generic: string; custom: string }>(
    'select statement, generic_plans as generic, custom_plans as custom from pg_prepared_statements',
  )
  return tables.flatMap((table) => {
    const statements = Object.entries(storeStatements(schema, table.name))
    return rows.flatMap((row) => {
      const kind = statements.find(([, s]) => s.text === row.statement)?.[0]
      if (!kind) return []
      const { generic, custom } = row
      return [
        { table: table.name, kind, genericPlans: Number(generic), customPlans: Number(custom) },
      ]
    })
  })
}
