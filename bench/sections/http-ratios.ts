/** The quotients of the HTTP section (./http.ts) between its variants. */
import { byName, pairedRatio, ratio, type VariantStats } from '../lib/measure'
import type { HttpRatios, HttpResult } from './http'

/**
 * The HTTP section's quotients, each as the median of the rounds' quotients and as the quotient of
 * the run's means.
 */
export function httpRatios(
  variants: VariantStats[],
): Pick<HttpResult, 'ratios' | 'transactional' | 'specRecordFloor' | 'floorAgainVsFloor'> {
  const ratiosOf = (
    adapter: 'tRPC' | 'Yoga',
    quotient: (a: VariantStats, b: VariantStats) => number,
  ): HttpRatios => {
    const of = (a: string, b: string) =>
      quotient(byName(variants, `${adapter} ${a}`), byName(variants, `${adapter} ${b}`))
    return {
      firstVsPlain: of('ours: first execution', 'plain'),
      replayVsPlain: of('ours: replay', 'plain'),
      firstVsFloor: of('ours: first execution', 'floor: first execution'),
      replayVsFloor: of('ours: replay', 'floor: replay'),
      storeReplayVsFloor: of('ours: replay, cache off', 'floor: replay'),
      floorFirstVsPlain: of('floor: first execution', 'plain'),
    }
  }
  const ofMeans = (a: VariantStats, b: VariantStats) => ratio(a.wallUsPerOp, b.wallUsPerOp)
  const both = (adapter: 'tRPC' | 'Yoga') => ({
    ...ratiosOf(adapter, (a, b) => pairedRatio(a, b)),
    ofMeans: ratiosOf(adapter, ofMeans),
  })
  const tx = byName(variants, 'tRPC ours, transactional: first execution')
  const specFloor = byName(variants, 'tRPC floor, SPEC record: first execution')
  const specVs = (quotient: (a: VariantStats, b: VariantStats) => number) => ({
    vsFloor: quotient(specFloor, byName(variants, 'tRPC floor: first execution')),
    oursVsIt: quotient(byName(variants, 'tRPC ours: first execution'), specFloor),
  })
  const txFloor = byName(variants, 'tRPC floor, transactional: first execution')
  const modeFloor = byName(
    variants,
    'tRPC floor, transactional as the mode runs it: first execution',
  )
  const txVs = (quotient: (a: VariantStats, b: VariantStats) => number) => ({
    firstVsTxFloor: quotient(tx, txFloor),
    drizzleVsTxFloor: quotient(
      byName(variants, 'tRPC ours, transactional, drizzle insert: first execution'),
      txFloor,
    ),
    unpreparedVsTxFloor: quotient(
      byName(variants, 'tRPC ours, transactional, unprepared insert: first execution'),
      txFloor,
    ),
    firstVsFloor: quotient(tx, byName(variants, 'tRPC floor: first execution')),
    firstVsOurs: quotient(tx, byName(variants, 'tRPC ours: first execution')),
    modeFloorVsTxFloor: quotient(modeFloor, txFloor),
    firstVsModeFloor: quotient(tx, modeFloor),
  })
  return {
    ratios: { tRPC: both('tRPC'), Yoga: both('Yoga') },
    transactional: { ...txVs((a, b) => pairedRatio(a, b)), ofMeans: txVs(ofMeans) },
    specRecordFloor: { ...specVs((a, b) => pairedRatio(a, b)), ofMeans: specVs(ofMeans) },
    floorAgainVsFloor: {
      medianOfRounds: pairedRatio(
        byName(variants, 'tRPC floor: first execution, again'),
        byName(variants, 'tRPC floor: first execution'),
      ),
      ofMeans: ofMeans(
        byName(variants, 'tRPC floor: first execution, again'),
        byName(variants, 'tRPC floor: first execution'),
      ),
    },
  }
}
