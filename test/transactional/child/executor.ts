/**
 * A process that runs one transactional operation and never finishes it: its handler inserts
 * the business row, tells the parent `inserted` over IPC, and waits for a kill. Started by
 * kill.postgres.test.ts with `--import tsx`; its argv[2] is the JSON config below.
 */
import { drizzle } from 'drizzle-orm/postgres-js'
import postgres from 'postgres'
import { createIdempotency } from '../../../src'
import { createDrizzleStore } from '../../../src/stores/drizzle'
import { defineTables, insertOrder } from '../tables'

export interface ExecutorConfig {
  url: string
  schema: string
  key: string
  operation: string
  item: string
}

export type ExecutorMessage = { type: 'inserted'; pid: number; id: number }

const config = JSON.parse(process.argv[2] ?? '{}') as ExecutorConfig
const client = postgres(config.url, { max: 1, onnotice: () => {} })
const tables = defineTables(config.schema)
const idempotency = createIdempotency({
  store: createDrizzleStore(drizzle({ client }), { table: tables.keys }),
  transactional: true,
})

await idempotency.execute(
  {
    key: config.key,
    operation: config.operation,
    payload: { item: config.item },
    transactional: true,
  },
  async ({ tx }) => {
    const order = await insertOrder(tx, tables.orders, config.key, config.item)
    process.send?.({ type: 'inserted', pid: process.pid, id: order.id } satisfies ExecutorMessage)
    // Parked until the parent kills this process: the transaction never commits.
    await new Promise(() => {})
    return order
  },
)
