import * as crypto from 'node:crypto'

// One-shot hashing (Node 20.12+) skips building a Hash object: about 1 µs per fingerprint.
const oneShotHash = (
  crypto as { hash?: (algorithm: string, data: string, encoding: string) => string }
).hash
/** SHA-256 of `text`, base64url. */
export const sha256 = oneShotHash
  ? (text: string) => oneShotHash('sha256', text, 'base64url')
  : (text: string) => crypto.createHash('sha256').update(text).digest('base64url')

/**
 * What JSON.stringify escapes in a string: `"`, `\\`, control characters and lone surrogates
 * (this also sends valid surrogate pairs to JSON.stringify, which leaves them as they are).
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it finds
const needsEscaping = /["\\\u0000-\u001f\ud800-\udfff]/

/** `JSON.stringify(text)`, for less: most strings need no escaping, and are just quoted. */
export function jsonString(text: string): string {
  return needsEscaping.test(text) ? JSON.stringify(text) : `"${text}"`
}

/** A stable, opaque derivation of several strings (used for downstream keys). */
export function hashParts(...parts: string[]): string {
  let text = ''
  for (const part of parts) text += `${part.length}:${part}`
  return sha256(text)
}
