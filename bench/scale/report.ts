/** The scale bench's Markdown summary, bench/results/scale.md. */
import { table, targetsTable } from '../lib/markdown'
import type { Budget, VariantStats } from '../lib/measure'
import type { SweepRun } from './sweep'
import { newSpaceShare, type ScaleResults, settingOf } from './targets'

const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`

function latencyTable(variants: VariantStats[]) {
  return table(
    ['variant', 'ops', 'ops/s', 'p50 ms', 'p99 ms'],
    variants.map((v) => [v.name, v.ops, v.opsPerSecond, v.p50Ms, v.p99Ms]),
  )
}

const budgetOf = (budget: Budget) =>
  `${budget.batch} operations per variant per round, up to ${budget.rounds} rounds or ${budget.maxMs / 1000} s${budget.concurrency ? `, ${budget.concurrency} in flight` : ''}`

export function scaleMarkdown(results: ScaleResults): string {
  const { machine, settings } = results
  return `${[
    '# Scale bench (`npm run bench:scale`)',
    '',
    `${machine.date} · ${machine.cpuModel}, ${machine.cores} cores, ${machine.memoryGiB} GiB · Node ${machine.node} (${machine.platform}) · load average at start ${machine.loadAverageAtStart} · ${results.durationSeconds} s`,
    '',
    `PostgreSQL ${settings.server_version}: ${Object.entries(settings)
      .filter(([name]) => name !== 'server_version')
      .map(([name, value]) => `${name}=${value}`)
      .join(', ')}. The tsup build of the package, through postgres.js (a pool of 20).`,
    '',
    '## Targets',
    '',
    targetsTable(results.targets),
    ...bigTableSection(results),
    ...sweepSection(results),
    ...statementsSection(results),
    ...emptyPlansSection(results),
  ].join('\n')}\n`
}

function bigTableSection({ bigTable: b, budgets }: ScaleResults): string[] {
  const { shape, size, ratios } = b
  return [
    '',
    '## 1. A big table',
    '',
    `${b.load.rows} records loaded with one \`INSERT … SELECT … FROM generate_series\` in ${b.load.seconds} s, into the table as \`ensureTable()\` made it, its primary key and \`expires_at\` index in place (built by CREATE INDEX after the load, the primary key would pack its leaf pages full; grown by inserts of random keys, as a real table's is, it keeps them about two thirds full), then \`VACUUM (ANALYZE)\` in ${b.vacuumAnalyzeSeconds} s and a \`CHECKPOINT\` in ${b.checkpointSeconds} s (the load's writes reach the disk before the measurements, not during them). A normal (logged) table, durable commits. ${b.load.expired} records expired, the rest completed and live, expiring over the next day (rows written over the last day, the oldest expired: a backlog for the two sweeps of part 2). Every row copies a record the engine wrote: scope \`${shape.scope}\`, a ${shape.keyLength}-character key (a UUID), a ${shape.fingerprintLength}-character fingerprint, a ${shape.leaseTokenLength}-character lease token and a ${shape.responseBytes}-byte response.`,
    '',
    `First executions (claim + complete, a new key each, the handler's answer stored as ${shape.responseBytes} bytes) through the engine, the variants interleaved in shuffled rounds. The empty tables are as \`ensureTable()\` leaves them (never analyzed); the third was ANALYZEd while empty (see part 4). One caller: ${budgetOf(budgets.bigTable.latency)}.`,
    '',
    latencyTable(b.latency),
    '',
    `Big ÷ empty: p50 ${ratios.p50}, p99 ${ratios.p99}; A/A (empty again ÷ empty) ${ratios.controlP50}, ${ratios.controlP99}; ANALYZEd while empty ÷ empty ${ratios.analyzedEmptyP50}, ${ratios.analyzedEmptyP99}.`,
    '',
    `16 callers at once (${budgetOf(budgets.bigTable.concurrent)}): throughput big ÷ empty ${ratios.concurrentThroughput} (A/A ${ratios.concurrentControlThroughput}), p99 big ÷ empty ${ratios.concurrentP99}.`,
    '',
    latencyTable(b.concurrent),
    '',
    `### Bytes per record (${size.rows} records, after VACUUM)`,
    '',
    table(
      ['', 'bytes', 'per record'],
      [
        ['heap (`pg_relation_size`)', size.heapBytes, size.bytesPerRecord.heap],
        ['indexes (`pg_indexes_size`)', size.indexBytes, size.bytesPerRecord.indexes],
        ['total (`pg_total_relation_size`)', size.totalBytes, size.bytesPerRecord.total],
        ...b.usage.indexes.map((i) => [
          `index \`${i.name}\``,
          i.bytes,
          (i.bytes / size.rows).toFixed(1),
        ]),
      ],
    ),
    '',
    'What uses each column and index: the columns each statement names, and the indexes in the generic plan of each (EXPLAIN EXECUTE with `plan_cache_mode = force_generic_plan`; `arbiter` is the index `ON CONFLICT` checks).',
    '',
    table(
      ['column or index', 'used by'],
      [
        ...b.usage.columns.map((c) => [
          `column \`${c.name}\``,
          c.usedBy.join(', ') || '**nothing**',
        ]),
        ...b.usage.indexes.map((i) => [
          `\`${i.definition}\``,
          i.usedBy.join(', ') || '**nothing**',
        ]),
      ],
    ),
    '',
    table(
      ['statement', 'how its generic plan reaches the table'],
      Object.entries(b.usage.access).map(([kind, access]) => [kind, access.join(', ')]),
    ),
  ]
}

function sweepSection({ sweep, settings, budgets }: ScaleResults): string[] {
  const { callers, rows, onMs, offMs, lockSampleMs } = budgets.sweep
  return [
    '',
    '## 2. Sweeping while serving',
    '',
    `Each sweep deletes ${rows} expired records of the big table (\`sweep({ batchSize, limit })\`, one batch a statement, with the pause between batches the setting names) on a connection of its own, while ${callers} callers run first executions on the pool. The sweep runs in stretches of ${onMs / 1000} s with ${offMs / 1000} s without it between; each caller's operation counts for the side it started on, so both sides share the machine's slow spells and the server's checkpoints. Lock waits are sampled every ${lockSampleMs} ms from a third connection (pg_locks, pg_stat_activity, pg_blocking_pids).`,
    '',
    table(
      [
        'sweep',
        'rows',
        'active s',
        'rows/s',
        'callers ops/s while sweeping / between',
        'p50 ms',
        'p99 ms',
        'p99 ÷',
        'throughput ÷',
        'lock samples: a caller blocked by the sweep',
        "callers' lock waits, all samples",
      ],
      sweep.map((r) => [
        settingOf(r),
        r.rows,
        r.activeSeconds,
        r.rowsPerSecond,
        `${r.during.opsPerSecond} / ${r.between.opsPerSecond}`,
        `${r.during.p50Ms} / ${r.between.p50Ms}`,
        `${r.during.p99Ms} / ${r.between.p99Ms}`,
        r.p99Ratio,
        r.throughputRatio,
        `${r.locks.samplesBlockedBySweep} of ${r.locks.samples}`,
        Object.entries(r.locks.callerLockWaits)
          .map(([event, count]) => `${count} × ${event}`)
          .join(', ') || 'none',
      ]),
    ),
    '',
    "A caller's lock wait that is not on the sweep is on another caller: `extend` is the lock taken to add a page to the table or an index.",
    '',
    `After each sweep: VACUUM (autovacuum is ${settings.autovacuum} on this server; where it is on, it runs the same VACUUM once the dead rows pass its threshold), then as many new records as the sweep deleted (expiring a day later, as records written now do). The dead rows are the swept records and one old version per caller's completion.`,
    '',
    table(
      [
        'after the sweep of',
        'dead rows before VACUUM',
        'after',
        'VACUUM s',
        'last autovacuum',
        'new records s',
      ],
      sweep.map((r) => [
        settingOf(r),
        r.deadTuplesBefore,
        r.deadTuplesAfter,
        r.vacuumSeconds,
        r.lastAutovacuum ?? 'never',
        r.refillSeconds,
      ]),
    ),
    '',
    sizesTable(sweep),
    '',
    `Of the new records inserted after each VACUUM, the share that needed new pages: heap ${sweep.map((r) => `${Math.round(newSpaceShare(r, 'heap') * 100)} %`).join(' and ')}, indexes ${sweep.map((r) => `${Math.round(newSpaceShare(r, 'indexes') * 100)} %`).join(' and ')} (first and second sweep). The heap takes them in the space the sweep freed; what grows it is the callers' own records written during a sweep, which go to new pages because freed space is usable only once VACUUM has recorded it. An index page the sweep empties is deleted by VACUUM and can be reused only once no transaction can still see it, so the \`expires_at\` index, whose new entries all go to its right end, takes new pages for them meanwhile; the primary key's new entries (random keys) land all over it, in the room its pages kept.`,
  ]
}

function sizesTable(sweep: SweepRun[]): string {
  const indexes = Object.keys(sweep[0]?.sizes[0]?.indexes ?? {})
  return table(
    ['sweep', 'step', 'records', 'heap', ...indexes, 'total', 'heap B/record', 'indexes B/record'],
    sweep.flatMap((r) =>
      r.sizes.map((s) => [
        settingOf(r),
        s.step,
        s.rows,
        mib(s.heapBytes),
        ...indexes.map((name) => mib(s.indexes[name] ?? 0)),
        mib(s.totalBytes),
        s.bytesPerRecord.heap,
        s.bytesPerRecord.indexes,
      ]),
    ),
  )
}

function statementsSection({ bigTable: b }: ScaleResults): string[] {
  const { statementsPerOp, writes } = b
  return [
    '',
    '## 3. Statements per operation',
    '',
    `SQL statements per first execution (claim + complete), counted by a drizzle logger over 50 of them: ${statementsPerOp.big} on the big table, ${statementsPerOp.empty} on an empty one. Rows they wrote (pg_stat_user_tables of the first empty table, which only first executions touched): ${writes.inserted} inserted, ${writes.updated} updated, ${writes.hotUpdated} of the updates heap-only (HOT): a completion sets \`expires_at\`, which is indexed, so it writes a new entry in each index.`,
  ]
}

function emptyPlansSection({ emptyPlans: e }: ScaleResults): string[] {
  const kinds = Object.keys(e.steps[0]?.tables[0]?.plans ?? {})
  return [
    '',
    '## 4. A table analyzed while empty',
    '',
    `Two tables made by \`ensureTable()\`, autovacuum off on both: one never analyzed, one ANALYZEd while empty. The store ran first executions on each over one connection (its statements planned generic after five custom plans), then each got ${e.rows} records without an ANALYZE. Each statement was also prepared on a second connection, explained six times while the tables were empty, and again at each step: the plan its next execution would use, "(generic)" when that is its cached generic plan rather than one made for the parameters.`,
    '',
    table(
      ['step', 'table', 'relpages', 'reltuples', ...kinds],
      e.steps.flatMap((step) =>
        step.tables.map((t) => [
          step.step,
          t.table,
          t.relpages,
          t.reltuples,
          ...kinds.map((kind) => {
            const plan = t.plans[kind as keyof typeof t.plans]
            return plan ? `${plan.access.join(', ')}${plan.generic ? ' (generic)' : ''}` : '–'
          }),
        ]),
      ),
    ),
    '',
    "The store's own connection, after the load (pg_prepared_statements). Five custom plans, then the generic one: more than five custom plans mean its plan cache was reset meanwhile (an ANALYZE of the table, or any CREATE or DROP SCHEMA in the database, resets the cached plans of every connection to it), which ends the effect early.",
    '',
    table(
      ['table', 'statement', 'generic plans', 'custom plans'],
      e.storePlans.map((p) => [p.table, p.kind, p.genericPlans, p.customPlans]),
    ),
    '',
    `First executions after the load, no ANALYZE:`,
    '',
    latencyTable(e.afterLoad),
    '',
    'After ANALYZE of the second table:',
    '',
    latencyTable(e.afterAnalyze),
  ]
}
