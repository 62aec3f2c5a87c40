import { initTRPC } from '@trpc/server'
import { middlewareMarker } from '@trpc/server/unstable-core-do-not-import'
import { describe, expect, it } from 'vitest'
import { replayedResult } from '../../adapters/trpc/result'

/**
 * A replay answers without calling `next()`, so the adapter builds the middleware result itself
 * (adapters/trpc/result.ts). These tests hold that construction to what tRPC builds: if a tRPC
 * release changes the marker or the result's form, they fail here first.
 */
describe('the replay result', () => {
  it("has the marker, ok flag and data of the result tRPC's next() returns", async () => {
    const t = initTRPC.create()
    const seen: unknown[] = []
    const probe = t.procedure.use(async ({ next }) => {
      const result = await next()
      seen.push(result)
      return result
    })
    const value = { at: new Date(0) }
    const router = t.router({ run: probe.mutation(() => value) })
    await t.createCallerFactory(router)({}).run()
    const built = replayedResult(value)
    expect(built.marker).toBe(middlewareMarker)
    expect(seen[0]).toMatchObject(built)
    expect(Object.keys(built).every((key) => Object.hasOwn(seen[0] as object, key))).toBe(true)
  })

  it('is returned by a procedure as its output, the way a resolver result is', async () => {
    const t = initTRPC.create()
    const value = { at: new Date(0), n: 1n }
    const router = t.router({
      run: t.procedure.use(async () => replayedResult(value)).mutation(() => 'not called'),
    })
    expect(await t.createCallerFactory(router)({}).run()).toBe(value)
  })
})
