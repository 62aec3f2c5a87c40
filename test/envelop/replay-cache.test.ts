import { describe, expect, it } from 'vitest'
import { createMemoryStore } from '../../src'
import { remoteStore } from '../support/remote-store'
import { createFixture, createOrder, type FixtureOptions, fetchClient } from './fixtures'

// The engine's replay cache behind the Yoga plugin: a retry answered from the process's copy of
// the record gets the bytes the first caller got (after masking), with the same status and header.
async function setup(plugin?: FixtureOptions['plugin']) {
  const fixture = createFixture({ store: remoteStore(createMemoryStore()), plugin })
  return { ...fixture, client: await fetchClient(fixture.yoga) }
}

describe('Yoga replays from the replay cache', () => {
  it('replays a result byte for byte with Idempotent-Replay: true and no claim', async () => {
    const { client, resolvers, store } = await setup()
    const body = { query: createOrder, variables: { item: 'book' } }
    const first = await client.post(body, { 'idempotency-key': 'c-1' })
    const replays = [
      await client.post(body, { 'idempotency-key': 'c-1' }),
      await client.post(body, { 'idempotency-key': 'c-1' }),
    ]
    expect(resolvers.createOrder).toHaveBeenCalledTimes(1)
    expect(store.claim).toHaveBeenCalledTimes(1)
    for (const replay of replays) {
      expect(replay.text).toBe(first.text)
      expect(replay.status).toBe(first.status)
      expect(replay.headers.get('idempotent-replay')).toBe('true')
    }
  })

  it('keeps a recorded unexpected error masked in every replay from the copy', async () => {
    const { client, resolvers, store } = await setup({ storeErrors: () => true })
    const failing = { query: 'mutation { failUnexpectedly { id } }' }
    const first = await client.post(failing, { 'idempotency-key': 'c-2' })
    const replays = [
      await client.post(failing, { 'idempotency-key': 'c-2' }),
      await client.post(failing, { 'idempotency-key': 'c-2' }),
    ]
    expect(resolvers.failUnexpectedly).toHaveBeenCalledTimes(1)
    expect(store.claim).toHaveBeenCalledTimes(1)
    for (const replay of replays) {
      expect(replay.text).toBe(first.text)
      expect(replay.text).toContain('Unexpected error.')
      expect(replay.text).not.toContain('hunter2')
    }
  })

  it('answers other variables under a copied key with IDEMPOTENCY_KEY_REUSED', async () => {
    const { client, resolvers, store } = await setup()
    await client.post(
      { query: createOrder, variables: { item: 'book' } },
      { 'idempotency-key': 'c-3' },
    )
    const reused = await client.post(
      { query: createOrder, variables: { item: 'lamp' } },
      { 'idempotency-key': 'c-3' },
    )
    expect(reused.status).toBe(422)
    expect(reused.json.errors[0].extensions.code).toBe('IDEMPOTENCY_KEY_REUSED')
    expect(resolvers.createOrder).toHaveBeenCalledTimes(1)
    expect(store.claim).toHaveBeenCalledTimes(1)
  })
})
