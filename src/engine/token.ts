import { randomFillSync } from 'node:crypto'

// Lease tokens are random (SPEC): 128 bits, written as 22 base64url characters. The bytes come
// from the CSPRNG 256 tokens at a time, as Node's `randomUUID` takes its own 128 UUIDs at a time:
// a token is then one string read from the pool, where `randomUUID` joins twenty pieces into its
// text (about 800 bytes of garbage on every keyed call, and a memory store keeps the result).
const tokenBytes = 16
const tokenPool = Buffer.alloc(tokenBytes * 256)
let tokenOffset = tokenPool.length

/**
 * A fresh random lease token. Random, not a per-process prefix and a counter, which two processes
 * started from one memory snapshot would share for good (a shared token defeats fencing); like
 * `randomUUID`'s cache, only the rest of the pool filled before a snapshot is shared.
 */
export function newLeaseToken(): string {
  if (tokenOffset === tokenPool.length) {
    randomFillSync(tokenPool)
    tokenOffset = 0
  }
  const token = tokenPool.toString('base64url', tokenOffset, tokenOffset + tokenBytes)
  tokenOffset += tokenBytes
  return token
}
