import { describe, expect, it } from 'vitest'
import {
  createIdempotency,
  createMemoryStore,
  defaultCodec,
  type IdempotencyStore,
} from '../../src'
import { createTRPCEcho, createYogaEcho } from '../support/echo-servers'

const tag = 'idempotent-mutations:stream'

/** Writes a record under `operation` and `key` the way another writer (or damage) left it. */
async function writeRecord(
  store: IdempotencyStore,
  operation: string,
  key: string,
  outcome: { ok: true; value: unknown } | { ok: false; error: unknown },
) {
  const idempotency = createIdempotency({ store, logger: { warn() {}, error() {} } })
  const attempt = await idempotency.begin({ key, operation, scope: '', payload: {} })
  if (attempt.kind !== 'execute') throw new Error(`expected to execute, got ${attempt.kind}`)
  if (outcome.ok) await attempt.lease.complete(outcome.value)
  else await attempt.lease.completeWithError(outcome.error)
}

describe('records an adapter cannot read answer 422 RESPONSE_NOT_STORED, never 500', () => {
  it('tRPC: a recorded error of another shape', async () => {
    const store = createMemoryStore()
    const app = createTRPCEcho({ superjson: false, store })
    await writeRecord(store, 'echo', 'k-error', { ok: false, error: { not: 'a trpc error' } })
    const answer = await app.call('k-error')
    expect(answer.status).toBe(422)
    expect(answer.body).toContain('could not be stored')
    expect(app.echo).not.toHaveBeenCalled()
  })

  it('tRPC: a streamed part whose recorded error is of another shape', async () => {
    const store = createMemoryStore()
    const app = createTRPCEcho({ superjson: false, store })
    const slot = (error: unknown) => ({ [tag]: 'promise', error, order: 0 })
    const rows = { [tag]: 'iterable', items: [1], orders: [0, 1], error: { not: 'an error' } }
    const value = { [tag]: 'object', value: { p: slot({ damaged: true }), rows } }
    await writeRecord(store, 'rows', 'k-part', { ok: true, value: { [tag]: 'stream', value } })
    const answer = await app.callStream('k-part')
    expect(answer.body).toContain('could not be stored')
    expect(answer.body).not.toContain('INTERNAL_SERVER_ERROR')
    expect(app.rows).not.toHaveBeenCalled()
  })

  it('Yoga: a record not written by the GraphQL plugin', async () => {
    // A store that, once `foreign` is set, hands back every recorded response as a value of
    // another writer's shape (the fingerprint stays the plugin's own).
    const inner = createMemoryStore()
    let foreign = false
    const rewrite = (found: unknown): unknown => {
      if (found === null || typeof found !== 'object') return found
      const copy: Record<string, unknown> = { ...(found as Record<string, unknown>) }
      for (const [name, item] of Object.entries(copy)) {
        if (name === 'response' && typeof item === 'string') {
          copy[name] = defaultCodec.encode({ ok: true, value: { foreign: 1 } })
        } else if (item !== null && typeof item === 'object') copy[name] = rewrite(item)
      }
      return copy
    }
    const store = new Proxy(inner, {
      get(target, name) {
        const member = Reflect.get(target, name)
        if (typeof member !== 'function') return member
        return async (...args: unknown[]) => {
          const found = await member.apply(target, args)
          return foreign ? rewrite(found) : found
        }
      },
    })
    const app = createYogaEcho({ store })
    app.state.output = 1
    await app.call('k-foreign')
    foreign = true
    const answer = await app.call('k-foreign')
    expect(answer.status).toBe(422)
    expect(answer.body).toContain('IDEMPOTENCY_RESPONSE_NOT_STORED')
    expect(app.echo).toHaveBeenCalledTimes(1)
  })
})
