import { getOperationAST, parse } from 'graphql'
import { describe, expect, it } from 'vitest'
import { analyzeMutation, fingerprintPayload } from '../../adapters/graphql/operation'
import { fingerprint } from '../../src'
import { createFixture, fetchClient } from './fixtures'

/** Parses `query` and analyses its one operation, as the plugin does per request. */
function analyse(document: ReturnType<typeof parse>, variables: Record<string, unknown> = {}) {
  const operation = getOperationAST(document)
  if (!operation) throw new Error('no operation')
  const analysis = analyzeMutation(document, operation, variables)
  return { analysis, payload: fingerprintPayload(operation, analysis, variables) }
}

describe('per-document analysis reused across requests', () => {
  it('gives each request the root fields its own @skip variables select, on one parsed document', () => {
    const document = parse(
      'mutation ($no: Boolean!) { chargeCard(amount: 1) @skip(if: $no) createOrder(item: "a") { id } }',
    )
    expect(analyse(document, { no: true }).analysis.fieldNames).toEqual(['createOrder'])
    expect(analyse(document, { no: false }).analysis.fieldNames).toEqual([
      'chargeCard',
      'createOrder',
    ])
    expect(analyse(document, { no: true }).analysis.fieldNames).toEqual(['createOrder'])
  })

  it('applies the operation’s boolean defaults to @skip and @include when the request gives no value', () => {
    const document = parse(
      'mutation ($dry: Boolean = true, $log: Boolean = false) { chargeCard(amount: 1) @skip(if: $dry) audit @include(if: $log) createOrder(item: "a") { id } }',
    )
    expect(analyse(document, {}).analysis.fieldNames).toEqual(['createOrder'])
    expect(analyse(document, { dry: false, log: true }).analysis.fieldNames).toEqual([
      'audit',
      'chargeCard',
      'createOrder',
    ])
  })

  it('fingerprints a reused document exactly like a fresh parse of the same operation', () => {
    const text =
      'mutation Pay($n: Int!) { ...P } fragment P on Mutation { chargeCard(amount: $n) } fragment Unused on Mutation { sendEmail(to: "x") }'
    const reused = parse(text)
    const first = analyse(reused, { n: 1 })
    const again = analyse(reused, { n: 1 })
    const fresh = analyse(parse(`# other spacing\n${text.replaceAll(' ', '  ')}`), { n: 1 })
    expect(fingerprint(again.payload)).toBe(fingerprint(first.payload))
    expect(fingerprint(fresh.payload)).toBe(fingerprint(first.payload))
    expect(fingerprint(analyse(reused, { n: 2 }).payload)).not.toBe(fingerprint(first.payload))
    expect((first.payload as { document: string }).document).not.toContain('Unused')
  })

  it('keeps the shared analysis of a document without directives out of callers’ reach', () => {
    const document = parse('mutation { createOrder(item: "a") { id } }')
    const { analysis } = analyse(document)
    expect(() => analysis.fieldNames.push('chargeCard')).toThrow(TypeError)
    expect(analyse(document).analysis.fieldNames).toEqual(['createOrder'])
  })

  it('hands getKey its own list of field names: what it does to them never reaches the next request', async () => {
    const { yoga, store } = createFixture({
      plugin: {
        getKey: ({ fieldNames }) => {
          const mine = fieldNames as string[]
          const key = `k-${mine.join('+')}`
          mine.reverse().push('extra')
          return key
        },
      },
    })
    const client = await fetchClient(yoga)
    const request = {
      query: 'mutation { sendEmail(to: "a@example.com") createOrder(item: "a") { id } }',
    }
    await client.post(request)
    await client.post(request)
    expect(
      store.claim.mock.calls.map(([input]) => [input.key, JSON.parse(input.scope)[1]]),
    ).toEqual([
      ['k-createOrder+sendEmail', 'createOrder,sendEmail'],
      ['k-createOrder+sendEmail', 'createOrder,sendEmail'],
    ])
  })
})
