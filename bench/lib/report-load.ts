/** The load section's console lines, Markdown and targets (see ../sections/load.ts). */
import type { LoadRatios, LoadResult } from '../sections/load'
import { table } from './markdown'
import type { Target } from './report'

export function loadLines(load: LoadResult): string[] {
  const { control, specRecord: spec } = load
  return [
    ...Object.entries(load.ratios).map(
      ([server, r]) =>
        `${server}: first execution throughput ÷ floor ${r.throughput} (median of rounds ${r.throughputMedianOfRounds}), p99 ÷ floor ${r.p99}, server CPU ÷ floor ${r.serverCpu}; replays throughput ÷ floor's ${r.replayThroughput}, p99 ÷ ${r.replayP99}${r.storeReplayThroughput === undefined ? '' : `; cache off ${r.storeReplayThroughput}`}`,
    ),
    `A/A control, the tRPC floor twice: throughput ${control.throughput} (median of rounds ${control.throughputMedianOfRounds}), p99 ${control.p99}`,
    `tRPC, the floor on the SPEC's record ÷ the floor: throughput ${spec.vsFloor.throughput} (median of rounds ${spec.vsFloor.throughputMedianOfRounds}), server CPU ${spec.vsFloor.serverCpu}; ours ÷ it: throughput ${spec.oursVsIt.throughput} (${spec.oursVsIt.throughputMedianOfRounds}), p99 ${spec.oursVsIt.p99}, server CPU ${spec.oursVsIt.serverCpu}`,
  ]
}

export function loadTargets(load: LoadResult): Target[] {
  return Object.entries(load.ratios).flatMap(([server, r]: [string, LoadRatios]) => [
    {
      name: `${server} under load (${load.clients} clients): first execution throughput vs the floor`,
      target: '≥ 0.90× the floor, p99 ≤ 1.2× the floor',
      measured: `${r.throughput}× (median of rounds ${r.throughputMedianOfRounds}×), p99 ${r.p99}× (A/A ${load.control.throughput}×, p99 ${load.control.p99}×)`,
      met: r.throughput >= 0.9 && r.p99 <= 1.2,
    },
    {
      name: `${server} under load (${load.clients} clients): replays vs the floor's replays`,
      target: "≥ 1.0× the floor's throughput",
      measured: `${r.replayThroughput}× (p99 ${r.replayP99}×)`,
      met: (r.replayThroughput ?? 0) >= 1,
    },
  ])
}

export function loadMarkdown(load: LoadResult): string[] {
  return [
    '',
    `## Under load (${load.clients} clients at once, the servers in a process of their own, PostgreSQL pool of ${load.poolSize})`,
    '',
    table(
      [
        'request',
        'req/s',
        'p50 ms',
        'p99 ms',
        'server CPU µs/request',
        'load generator wakeups/request',
        'statements',
        'round trips',
        'Redis commands',
      ],
      load.variants.map((v) => {
        const per = load.perRequest[v.name]
        return [
          v.name,
          v.opsPerSecond,
          v.p50Ms,
          v.p99Ms,
          v.otherCpuUsPerOp,
          v.wakeupsPerOp,
          per?.statements,
          per?.roundTrips,
          per?.redisCommands,
        ]
      }),
    ),
    '',
    "Ours ÷ the floor: throughput over the whole run (the median of the rounds' quotients in brackets), p99 latency.",
    '',
    table(
      [
        'server',
        'first execution throughput',
        'first execution p99',
        'first execution server CPU',
        'replay throughput',
        'replay p99',
        'replay (cache off) throughput',
      ],
      [
        ...Object.entries(load.ratios).map(([server, r]) => [
          server,
          `${r.throughput} (${r.throughputMedianOfRounds})`,
          r.p99,
          r.serverCpu,
          r.replayThroughput,
          r.replayP99,
          r.storeReplayThroughput ?? '',
        ]),
        firstOnly('A/A: the tRPC floor twice', load.control),
        firstOnly("tRPC: the floor on the SPEC's record ÷ the floor", load.specRecord.vsFloor),
        firstOnly("tRPC: ours ÷ the floor on the SPEC's record", load.specRecord.oursVsIt),
      ],
    ),
  ]
}

/** A row of the ratios table with first executions only. */
function firstOnly(name: string, r: LoadRatios) {
  return [name, `${r.throughput} (${r.throughputMedianOfRounds})`, r.p99, r.serverCpu, '', '', '']
}
