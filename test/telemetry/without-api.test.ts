import { describe, expect, it, vi } from 'vitest'
import { createIdempotency, createMemoryStore, type IdempotencyEvent } from '../../src'
import { createRecordingSdk } from './sdk'

// `@opentelemetry/api` is an optional peer: the library loads it with `require`, and a require
// that throws (the package is not installed) must leave the library working, recording nothing.
vi.mock('node:module', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:module')>()
  const createRequire: typeof actual.createRequire = (from) => {
    const require = actual.createRequire(from)
    return Object.assign((id: string) => {
      if (id === '@opentelemetry/api') {
        throw Object.assign(new Error(`Cannot find module '${id}'`), { code: 'MODULE_NOT_FOUND' })
      }
      return require(id)
    }, require)
  }
  return { ...actual, default: { ...actual, createRequire }, createRequire }
})

describe('without @opentelemetry/api installed', () => {
  it('loads, runs and replays operations, and records nothing even with an SDK registered', async () => {
    const { loadOpenTelemetry } = await import('../../src/telemetry/api')
    expect(loadOpenTelemetry()).toBeUndefined()
    const sdk = createRecordingSdk({ register: true })
    const events: IdempotencyEvent['type'][] = []
    const idempotency = createIdempotency({
      store: createMemoryStore(),
      onEvent: (event) => events.push(event.type),
    })
    const request = { key: 'k-no-api', operation: 'payments.charge', payload: { amount: 5 } }
    await idempotency.execute(request, () => 'charged')
    expect(await idempotency.execute(request, () => 'charged twice')).toEqual({
      value: 'charged',
      replayed: true,
    })
    expect(events).toEqual(['executed', 'replayed'])
    expect(sdk.spans()).toEqual([])
    expect(await sdk.points('idempotency.operations')).toEqual([])
    await sdk.shutdown()
  })
})
