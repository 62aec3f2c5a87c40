/**
 * The hand-written floor on Redis: `SET key in_progress NX PX lease GET` claims the key or
 * answers what it holds (one round trip either way), the mutation runs, `SET key response PX
 * ttl` completes it. No fingerprint, lease token or fenced completion: the least that runs a
 * key once.
 */
import type { createClient } from 'redis'

const leaseMs = 60_000
const ttlMs = 86_400_000
const inProgress = '\u0000in_progress'

export function createRedisFloor(client: ReturnType<typeof createClient>, prefix: string) {
  return async function redisFloor<T>(key: string, mutate: () => Promise<T>): Promise<T> {
    const id = `${prefix}${key}`
    const held = await client.set(id, inProgress, {
      condition: 'NX',
      expiration: { type: 'PX', value: leaseMs },
      GET: true,
    })
    if (held === null) {
      const value = await mutate()
      await client.set(id, JSON.stringify(value), { expiration: { type: 'PX', value: ttlMs } })
      return value
    }
    if (held === inProgress) throw new Error('in progress')
    return JSON.parse(String(held)) as T
  }
}
