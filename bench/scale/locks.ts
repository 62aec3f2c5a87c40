/**
 * Lock waits of the callers while the sweep runs, sampled from a connection of their own every
 * `everyMs`: heavyweight locks the callers' sessions wait for (pg_locks not granted,
 * pg_stat_activity's `Lock` waits), and whether any of them waits for the sweep's session
 * (`pg_blocking_pids`), and whether the sweep waits on one. This is sampling, not a readiness
 * check: a wait shorter than the interval can slip between two samples.
 */
import { sleep } from './callers'
import type { Connection } from './connections'

export interface LockSamples {
  samples: number
  /** Most lock requests of the callers not granted at one sample. */
  maxUngrantedLocks: number
  /** Most callers waiting on a heavyweight lock (`wait_event_type = 'Lock'`) at one sample. */
  maxCallersWaitingOnLock: number
  /** The callers' lock waits over all samples, by `wait_event` (`extend`, `transactionid`, …). */
  callerLockWaits: Record<string, number>
  /** Samples in which a caller waited for the sweep's session. */
  samplesBlockedBySweep: number
  /** Samples in which the sweep's session itself waited on a heavyweight lock. */
  samplesSweepWaiting: number
}

const sampleQuery = `select
    (select count(*)::int from pg_locks l join pg_stat_activity a on a.pid = l.pid
      where not l.granted and a.application_name = $1) as ungranted,
    (select coalesce(array_agg(wait_event::text), '{}') from pg_stat_activity
      where application_name = $1 and wait_event_type = 'Lock') as waiting,
    (select count(*)::int from pg_stat_activity
      where application_name = $1 and $2::int = any(pg_blocking_pids(pid))) as blocked,
    (select count(*)::int from pg_stat_activity
      where pid = $2::int and wait_event_type = 'Lock') as "sweepWaiting"`

interface Sample {
  ungranted: number
  waiting: string[]
  blocked: number
  sweepWaiting: number
}

/** Starts sampling the sessions named `callers` and the sweep's session `sweepPid`. */
export function sampleLocks(
  connection: Connection,
  callers: string,
  sweepPid: number,
  everyMs = 50,
): { stop(): Promise<LockSamples> } {
  const result: LockSamples = {
    samples: 0,
    maxUngrantedLocks: 0,
    maxCallersWaitingOnLock: 0,
    callerLockWaits: {},
    samplesBlockedBySweep: 0,
    samplesSweepWaiting: 0,
  }
  let stopped = false
  const loop = (async () => {
    while (!stopped) {
      const [row] = await connection.query<Sample>(sampleQuery, [callers, sweepPid])
      const { ungranted, waiting, blocked, sweepWaiting } = row!
      result.samples++
      result.maxUngrantedLocks = Math.max(result.maxUngrantedLocks, ungranted)
      result.maxCallersWaitingOnLock = Math.max(result.maxCallersWaitingOnLock, waiting.length)
      for (const event of waiting) {
        result.callerLockWaits[event] = (result.callerLockWaits[event] ?? 0) + 1
      }
      if (blocked > 0) result.samplesBlockedBySweep++
      if (sweepWaiting > 0) result.samplesSweepWaiting++
      await sleep(everyMs)
    }
  })()
  return {
    async stop() {
      stopped = true
      await loop
      return result
    },
  }
}
