import { randomUUID } from 'node:crypto'
import { describe, expect, it, vi } from 'vitest'
import {
  createIdempotency,
  fingerprint,
  type IdempotencyEvent,
  type IdempotencyStore,
  isIdempotencyError,
} from '..'

/** An error class whose `name` is a class field: an own enumerable property, unlike `Error`'s. */
class DeclinedError extends Error {
  override name = 'DeclinedError'
  readonly code = 'card_declined'
}

/** A result holding what superjson alone does not read back as it was. */
const binaryResult = () => ({
  file: Buffer.from('%PDF-1.7 \u0000\u00ff', 'latin1'),
  samples: new Float64Array([Number.NaN, -0, 1.5]),
  reason: new Error('declined'),
  declined: new DeclinedError('card declined'),
})

/** superjson's text for a Buffer as this library wrote it before it could read one back. */
const unreadableBufferRecord =
  '{"json":{"ok":true,"value":[104,105]},"meta":{"values":{"value":[["typed-array","Buffer"]]},"v":1}}'

/**
 * Replay fidelity on one store: what the engine records there reads back as it was written, and
 * a record that does not read back answers RESPONSE_NOT_STORED, never a 500. Run by the store
 * conformance suite, so every store passes it.
 */
export function describeReplayFidelity(
  createStore: () => IdempotencyStore | Promise<IdempotencyStore>,
  now: (() => number) | undefined,
): void {
  describe('replay fidelity through an engine on this store', () => {
    const engineOn = (store: IdempotencyStore, replayCache: boolean) => {
      const events: IdempotencyEvent[] = []
      const logger = { warn: vi.fn(), error: vi.fn() }
      const idempotency = createIdempotency({
        store,
        ...(now ? { now } : {}),
        logger,
        replayCache: replayCache ? {} : false,
        onEvent: (event) => void events.push(event),
      })
      return { idempotency, events, logger }
    }

    it.each([
      ['with', true],
      ['without', false],
    ])(
      'a Buffer, a typed array and errors replay as they were, %s the replay cache',
      async (_, cache) => {
        const store = await createStore()
        const { idempotency } = engineOn(store, cache)
        const request = { key: randomUUID(), operation: 'files.upload', payload: { name: 'a.pdf' } }
        const handler = vi.fn(binaryResult)
        const first = await idempotency.execute(request, handler)
        // Once from this engine (its copy, when it keeps one), once from a fresh one (the store).
        for (const engine of [idempotency, engineOn(store, cache).idempotency]) {
          const replay = await engine.execute(request, handler)
          expect(replay.replayed).toBe(true)
          expect(JSON.stringify(replay.value)).toBe(JSON.stringify(first.value))
          expect(Buffer.isBuffer(replay.value.file)).toBe(true)
          expect(replay.value.file.equals(first.value.file)).toBe(true)
          expect(replay.value.samples).toBeInstanceOf(Float64Array)
          expect(Object.is(replay.value.samples[1], -0)).toBe(true)
          expect(Number.isNaN(replay.value.samples[0])).toBe(true)
          expect(Object.keys(replay.value.reason)).toEqual([])
          expect(Object.keys(replay.value.declined)).toEqual(['name', 'code'])
          expect(replay.value.declined).toMatchObject({
            name: 'DeclinedError',
            message: 'card declined',
          })
        }
        expect(handler).toHaveBeenCalledTimes(1)
      },
    )

    it('a record that does not read back answers RESPONSE_NOT_STORED, says why, and never runs again', async () => {
      const store = await createStore()
      const key = randomUUID()
      const payload = { name: 'a.pdf' }
      const input = {
        scope: JSON.stringify(['', 'files.upload']),
        key,
        fingerprint: fingerprint(payload),
        leaseToken: randomUUID(),
        lockTimeoutMs: 60_000,
        ttlMs: 60_000,
      }
      expect((await store.claim(input)).claimed).toBe(true)
      await store.complete({ ...input, response: unreadableBufferRecord })
      const { idempotency, events, logger } = engineOn(store, true)
      const handler = vi.fn(() => 'again')
      for (let attempt = 0; attempt < 2; attempt++) {
        const error = await idempotency
          .execute({ key, operation: 'files.upload', payload }, handler)
          .catch((thrown: unknown) => thrown)
        expect(isIdempotencyError(error) && error.code).toBe('RESPONSE_NOT_STORED')
      }
      expect(handler).not.toHaveBeenCalled()
      expect(events.map((event) => event.type)).toEqual(['not-stored', 'not-stored'])
      expect(String(events[0]?.error)).toMatch(/typed array/)
      expect(logger.error).toHaveBeenCalledWith(
        expect.stringMatching(/cannot be read back/),
        expect.any(Error),
      )
    })
  })
}
