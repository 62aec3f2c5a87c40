/**
 * The plans PostgreSQL makes for the store's own statements: each one prepared on a connection
 * of its own (as postgres.js and node-postgres prepare them) and explained with `EXPLAIN
 * EXECUTE`, which plans it as the next execution would be planned (a custom plan, or the cached
 * generic one), without running it. PostgreSQL 15 has no `EXPLAIN (GENERIC_PLAN)`.
 */
import { postgresStatements } from '../../src/stores/drizzle/postgres/sql'
import type { Statement } from '../../src/stores/drizzle/runner'
import { defineIdempotencyTable } from '../../src/stores/drizzle/table'
import type { PgDatabase } from '../lib/database'
import { type Connection, openConnection } from './connections'
import { columnsOf, type IndexSize, indexesOf } from './sizes'
import type { ScaleTable } from './tables'

/** The store's statements on a records table: the claim's two, and every other call's. */
export const storeStatementKinds = [
  'insertOrRead',
  'underLock',
  'complete',
  'release',
  'get',
  'inspect',
  'deletePinned',
  'sweep',
] as const
export type StatementKind = (typeof storeStatementKinds)[number]

/** The store's statements on table `name` of `schema`, by kind. */
export function storeStatements(schema: string, name: string): Record<StatementKind, Statement> {
  return postgresStatements(defineIdempotencyTable(name, schema))
}

export interface Explained {
  /** How the plan reaches the table: `seq scan`, `index <name>`, `arbiter <name>`. */
  access: string[]
  /** Whether the plan was the statement's generic one (pg_prepared_statements counts it). */
  generic: boolean
}

export interface Prepared {
  explain(): Promise<Explained>
  deallocate(): Promise<void>
}

interface PlanNode {
  'Node Type': string
  'Relation Name'?: string
  'Index Name'?: string
  'Conflict Arbiter Indexes'?: string[]
  Plans?: PlanNode[]
}

function accessOf(node: PlanNode, table: string, into = new Set<string>()): Set<string> {
  if (node['Node Type'] === 'Seq Scan' && node['Relation Name'] === table) into.add('seq scan')
  if (node['Index Name']) into.add(`index ${node['Index Name']}`)
  for (const arbiter of node['Conflict Arbiter Indexes'] ?? []) into.add(`arbiter ${arbiter}`)
  for (const child of node.Plans ?? []) accessOf(child, table, into)
  return into
}

/** A literal for each parameter: a number of milliseconds or rows, else a string. */
const literalFor = (field: string) => (/Ms$|batchSize/.test(field) ? `'1000'` : `'x'`)

/** Prepares `statement` (of table `table`) on `connection` as `name`. */
export async function prepare(
  connection: Connection,
  name: string,
  statement: Statement,
  table: string,
): Promise<Prepared> {
  await connection.query(`prepare ${name} as ${statement.text}`)
  const execute = `execute ${name}(${statement.params.map(literalFor).join(', ')})`
  // How often the statement ran on its generic plan: one more after an EXPLAIN EXECUTE that used it.
  const genericPlans = async () => {
    const [row] = await connection.query<{ generic: string }>(
      'select generic_plans as generic from pg_prepared_statements where name = $1',
      [name],
    )
    return Number(row?.generic)
  }
  return {
    async explain() {
      const before = await genericPlans()
      const [row] = await connection.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
        `explain (format json) ${execute}`,
      )
      return {
        access: [...accessOf(row!['QUERY PLAN'][0].Plan, table)],
        generic: (await genericPlans()) > before,
      }
    },
    deallocate: async () => {
      await connection.query(`deallocate ${name}`)
    },
  }
}

/** Each store statement on `table`, explained once with the generic plan forced. */
export async function genericAccess(
  connection: Connection,
  schema: string,
  table: string,
): Promise<Record<StatementKind, string[]>> {
  const statements = storeStatements(schema, table)
  await connection.query('set plan_cache_mode = force_generic_plan')
  const access = {} as Record<StatementKind, string[]>
  try {
    for (const kind of storeStatementKinds) {
      const prepared = await prepare(connection, `scale_${kind}`, statements[kind], table)
      access[kind] = (await prepared.explain()).access
      await prepared.deallocate()
    }
  } finally {
    await connection.query('reset plan_cache_mode')
  }
  return access
}

export interface Usage {
  name: string
  /** The store's statements that use it. */
  usedBy: StatementKind[]
}

export interface TableUsage {
  /** How each statement's generic plan reaches the table. */
  access: Record<StatementKind, string[]>
  /** The statements that name each column. */
  columns: Usage[]
  /** The statements whose generic plan uses each index. */
  indexes: (IndexSize & Usage)[]
}

/** Which of the store's statements use each column and index of `table`. */
export async function usageOf(
  database: PgDatabase,
  url: string,
  table: ScaleTable,
): Promise<TableUsage> {
  const planner = openConnection(url, `${database.schema}_planner`)
  const access = await genericAccess(planner, database.schema, table.name).finally(planner.close)
  const statements = storeStatements(database.schema, table.name)
  const usedBy = (uses: (kind: StatementKind) => boolean) => storeStatementKinds.filter(uses)
  const columns = (await columnsOf(database, table)).map((name) => ({
    name,
    usedBy: usedBy((kind) => new RegExp(`\\b${name}\\b`).test(statements[kind].text)),
  }))
  const indexes = (await indexesOf(database, table)).map((index) => ({
    ...index,
    usedBy: usedBy((kind) => access[kind].some((a) => a.endsWith(` ${index.name}`))),
  }))
  return { access, columns, indexes }
}
