/**
 * `npm run bench:compare -- <revision>`: this working tree against the package as it was at a
 * git revision, side by side in one process, with an A/A control (this tree built twice and
 * loaded as two copies). A change is within noise when its ratio to the revision is as close to
 * 1.00 as the A/A's is.
 *
 *   npm run bench:compare -- main                  the engine, tRPC and the Drizzle store on PGlite
 *   DATABASE_URL=... npm run bench:compare -- main + the Drizzle store on PostgreSQL
 *   npm run bench:compare -- main --quick          a few rounds, to check the script runs
 *
 * Every figure is the median over rounds of the per-round quotient of wall time per operation
 * (each round runs every variant in a shuffled order).
 */
import { initTRPC } from '@trpc/server'
import { type BuiltLibrary, buildLibrary, buildRevision } from './lib/build'
import { type Database, openDatabase } from './lib/database'
import { describeMachine } from './lib/machine'
import { type Budget, byName, compare, pairedRatio, type Variant } from './lib/measure'
import { orderInput } from './sections/fixtures'

const args = process.argv.slice(2)
const quick = args.includes('--quick')
const revision = args.find((arg) => !arg.startsWith('--'))
if (!revision) {
  console.error('usage: npm run bench:compare -- <git revision> [--quick]')
  process.exit(2)
}
const databaseUrl = process.env.DATABASE_URL || undefined
const log = (line: string) => console.log(`[compare] ${line}`)

const budgets = {
  engine: quick
    ? { batch: 200, rounds: 3, maxMs: 2_000, warmupRounds: 1 }
    : { batch: 2_000, rounds: 30, maxMs: 30_000, warmupRounds: 3 },
  store: quick
    ? { batch: 10, rounds: 3, maxMs: 3_000, warmupRounds: 1 }
    : { batch: 50, rounds: 30, maxMs: 45_000, warmupRounds: 2 },
} satisfies Record<string, Budget>

/** One copy of the package under test: this tree, its A/A twin, or the revision. */
interface Copy {
  name: string
  lib: BuiltLibrary
}

const handler = async () => ({ id: 'order-1', item: orderInput.item, total: 199.5 })

/** The engine on its in-memory store: a keyed first execution and a replay. */
function engineVariants({ name, lib }: Copy): Variant[] {
  const idempotency = lib.core.createIdempotency({ store: lib.core.createMemoryStore() })
  const run = (key: string) =>
    idempotency.execute({ key, operation: 'orders.create', payload: orderInput }, handler)
  return [
    { name: `${name}: engine first`, op: (i) => run(`first-${i}`) },
    { name: `${name}: engine replay`, op: (i) => run(`first-${i % 500}`) },
  ]
}

/** A tRPC procedure behind the middleware, called through a server-side caller. */
function trpcVariants({ name, lib }: Copy): Variant[] {
  const idempotency = lib.core.createIdempotency({ store: lib.core.createMemoryStore() })
  const t = initTRPC.context<{ key: string }>().create()
  const router = t.router({
    pay: t.procedure
      .use(lib.trpc.createIdempotencyMiddleware({ idempotency, getKey: ({ ctx }) => ctx.key }))
      .mutation(handler),
  })
  const call = (key: string) => router.createCaller({ key }).pay()
  return [
    { name: `${name}: tRPC first`, op: (i) => call(`first-${i}`) },
    { name: `${name}: tRPC replay`, op: (i) => call(`first-${i % 500}`) },
  ]
}

/** The Drizzle store, every replay read from the database (no replay cache). */
async function storeVariants({ name, lib }: Copy, database: Database): Promise<Variant[]> {
  const store = lib.drizzle.createDrizzleStore(
    database.db as never,
    database.table(lib.drizzle, `records_${name.replace(/\W/g, '_')}`) as never,
  ) as { ensureTable(): Promise<void> } & Parameters<typeof lib.core.createIdempotency>[0]['store']
  await store.ensureTable()
  const idempotency = lib.core.createIdempotency({ store, replayCache: false })
  const run = (key: string) =>
    idempotency.execute({ key, operation: 'orders.create', payload: orderInput }, handler)
  for (let i = 0; i < 100; i++) await run(`replay-${i}`)
  const before = database.statements.count
  for (let i = 0; i < 20; i++) await run(`counted-${i}`)
  const first = (database.statements.count - before) / 20
  for (let i = 0; i < 20; i++) await run(`replay-${i}`)
  const replay = (database.statements.count - before) / 20 - first
  log(`  ${name}: statements per first execution ${first}, per replay ${replay}`)
  return [
    { name: `${name}: ${database.backend} first`, op: (i) => run(`first-${i}`) },
    { name: `${name}: ${database.backend} replay`, op: (i) => run(`replay-${i % 100}`) },
  ]
}

/** Prints, per workload, this tree ÷ the revision and the A/A control. */
function report(stats: Awaited<ReturnType<typeof compare>>, copies: Copy[], workloads: string[]) {
  const [ours, twin, theirs] = copies.map((copy) => copy.name)
  for (const workload of workloads) {
    const of = (copy: string | undefined) => byName(stats, `${copy}: ${workload}`)
    const change = pairedRatio(of(ours), of(theirs))
    const control = pairedRatio(of(twin), of(ours))
    const us = (copy: string | undefined) => Math.round(of(copy).wallUsPerOp)
    log(
      `  ${workload.padEnd(18)} this tree ÷ ${revision}: ${change.toFixed(2)}   A/A: ${control.toFixed(2)}   (µs per op: ${us(ours)} / ${us(theirs)})`,
    )
  }
}

async function main(): Promise<void> {
  const machine = describeMachine()
  log(`${machine.cpuModel}, ${machine.cores} cores, Node ${machine.node}`)
  log(`building this tree twice and ${revision} ...`)
  const copies: Copy[] = [
    { name: 'this', lib: await buildLibrary() },
    { name: 'twin', lib: await buildLibrary('-twin') },
    { name: 'then', lib: await buildRevision(revision!) },
  ]
  try {
    log('engine and tRPC on the in-memory store (CPU-bound) ...')
    const inMemory = copies.flatMap((copy) => [...engineVariants(copy), ...trpcVariants(copy)])
    report(await compare(inMemory, budgets.engine), copies, [
      'engine first',
      'engine replay',
      'tRPC first',
      'tRPC replay',
    ])
    for (const backend of databaseUrl ? (['pglite', 'postgres'] as const) : (['pglite'] as const)) {
      log(`the Drizzle store on ${backend}, replays read from the database ...`)
      const database = await openDatabase(backend, databaseUrl)
      try {
        const variants: Variant[] = []
        // One copy after the other: each counts its own statements.
        for (const copy of copies) variants.push(...(await storeVariants(copy, database)))
        report(await compare(variants, budgets.store), copies, [
          `${backend} first`,
          `${backend} replay`,
        ])
      } finally {
        await database.close()
      }
    }
  } finally {
    await Promise.all(copies.map((copy) => copy.lib.dispose()))
  }
}

await main()
