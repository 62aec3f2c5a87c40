/** The Redis section's targets and Markdown (see bench/sections/redis.ts and redis-floor.ts). */
import type { RedisResult } from '../sections/redis'
import type { Quotient, RedisFloorResult } from '../sections/redis-floor'
import { answers, latencyRows, table } from './markdown'
import type { Target } from './report'

const times = (q: Quotient) => `${q.medianOfRounds}× (ratio of means ${q.ofMeans}×)`

export function redisTargets(redis: RedisResult): Target[] {
  const { floor } = redis
  const { Powertools: powertools, 'node-idempotency': peer } = floor.replays
  const targets: Target[] = [
    {
      name: 'Redis: first execution vs the raw floor (SET NX PX, then SET, on the same node-redis client)',
      target: '≤ 1.05×',
      measured: `${times(floor.firstVsFloor)}; A/A control ${times(floor.control)}`,
      met: floor.firstVsFloor.medianOfRounds <= 1.05,
    },
  ]
  // Each peer against ours on the peer's own client library (Powertools is handed node-redis 5;
  // node-idempotency brings redis@4): the quotient then compares the libraries, not the clients.
  for (const [path, kind] of [
    ['from the replay cache', 'cacheOn'],
    ['in one round trip (replay cache off)', 'cacheOff'],
  ] as const) {
    const [vsPowertools, vsPeer] = [powertools[kind], peer[kind]]
    targets.push({
      name: `Redis: replay ${path} vs each peer's replay`,
      target: '≤ 0.60× of Powertools and of @node-idempotency/core',
      measured: `÷ Powertools ${times(vsPowertools)}, ÷ node-idempotency ${times(vsPeer)}`,
      met: vsPowertools.medianOfRounds <= 0.6 && vsPeer.medianOfRounds <= 0.6,
    })
  }
  for (const library of redis.libraries.filter((l) => l.library === 'idempotent-mutations')) {
    targets.push({
      name: `Redis (${library.client}): ${library.storm.callers}-caller storm on one key`,
      target: 'handler runs once',
      measured: `${library.storm.executions} execution(s)`,
      met: library.storm.executions === 1 && library.storm.unanswered === 0,
    })
  }
  return targets
}

export function redisMarkdown(redis: RedisResult): string[] {
  const { floor } = redis
  const row = (label: string, q: Quotient) => [label, q.medianOfRounds, q.ofMeans, q.ofP50s]
  return [
    '',
    '## Redis, side by side',
    '',
    table(
      [
        'library (client)',
        'round trips, first execution',
        'round trips, replay',
        'storm: callers',
        'storm: handler ran',
        'storm: answers',
      ],
      redis.libraries.map((l) => [
        `${l.library} (${l.client})`,
        l.roundTrips.firstExecution,
        l.roundTrips.replay,
        l.storm.callers,
        l.storm.executions,
        answers(l.storm),
      ]),
    ),
    '',
    table(['one caller', 'p50 ms', 'p99 ms', 'ops/s', 'CPU µs/op'], latencyRows(redis.latency)),
    '',
    "Against the raw floor on the same node-redis client: a first execution's `SET key marker NX PX ttl`, the handler, `SET key response PX ttl`; a replay's `GET`. Our store alone: its claim and complete called around the handler, without the engine.",
    '',
    table(
      ['time ÷', 'median of rounds', 'ratio of means', 'ratio of p50s'],
      [
        row('first execution (default settings) ÷ raw floor', floor.firstVsFloor),
        row('first execution, replay cache off ÷ raw floor', floor.firstCacheOffVsFloor),
        row('A/A control: raw floor ÷ raw floor', floor.control),
        row('our store alone ÷ raw floor', floor.storeVsFloor),
        row('first execution, replay cache off ÷ our store alone', floor.oursVsStore),
        row('replay in one round trip ÷ GET', floor.replayCacheOffVsGet),
        ...Object.entries(floor.replays).flatMap(([name, r]) => [
          row(`replay from the replay cache ÷ ${name}`, r.cacheOn),
          row(`replay in one round trip ÷ ${name} (on its client)`, r.cacheOff),
        ]),
      ],
    ),
    '',
    "The server's time per call (`INFO commandstats`, deltas over a run of each call alone; a script's time includes the commands it calls):",
    '',
    table(
      ['call', 'command', 'calls counted', 'server µs per call', 'commands it called, per call'],
      floor.serverTimes.map((t) => [
        t.call,
        t.command,
        t.calls,
        t.usecPerCall,
        Object.entries(t.inner)
          .map(([name, count]) => `${name} ${count}`)
          .join(', '),
      ]),
    ),
  ]
}

/** The console lines of the comparison with the raw floor. */
export function redisFloorLines(floor: RedisFloorResult): string[] {
  const q = ({ medianOfRounds, ofMeans }: Quotient) => `${medianOfRounds} (${ofMeans})`
  return [
    `first execution ÷ raw floor (SET NX PX, SET), medians of rounds (ratios of means): ${q(floor.firstVsFloor)}, replay cache off ${q(floor.firstCacheOffVsFloor)}; A/A control ${q(floor.control)}; our store alone ÷ floor ${q(floor.storeVsFloor)}, ours ÷ our store alone ${q(floor.oursVsStore)}`,
    ...Object.entries(floor.replays).map(
      ([peer, r]) =>
        `replay ÷ ${peer}: from the replay cache ${q(r.cacheOn)}, cache off ${q(r.cacheOff)}`,
    ),
    `server µs per call: ${floor.serverTimes.map((t) => `${t.call} ${t.usecPerCall}`).join(', ')}`,
  ]
}
