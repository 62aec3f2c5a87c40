import { envelop, useEngine, useSchema } from '@envelop/core'
import { execute, parse, specifiedRules, subscribe, validate } from 'graphql'
import { createSchema } from 'graphql-yoga'
import { describe, expect, it } from 'vitest'
import { idempotentDirectiveTypeDefs, useIdempotency } from '../../adapters/envelop'
import { createIdempotency, createMemoryStore } from '../../src'
import { describeGraphQLSchemaCases } from '../adapters/graphql-cases'
import { codeFirstSchema, createClock, createFixture, fetchClient, yogaHost } from './fixtures'

async function setup(options?: Parameters<typeof createFixture>[0]) {
  const fixture = createFixture(options)
  return { ...fixture, client: await fetchClient(fixture.yoga) }
}

describe('schema options of useIdempotency', () => {
  it('exports a directive definition that SDL schemas build with', () => {
    expect(parse(idempotentDirectiveTypeDefs).definitions[0]).toMatchObject({
      kind: 'DirectiveDefinition',
      name: { value: 'idempotent' },
      locations: [{ value: 'FIELD_DEFINITION' }],
    })
  })

  it('replays an @idempotent(ttl: 30) field for 30 seconds, then runs it again', async () => {
    const clock = createClock()
    const { client, resolvers } = await setup({ engine: { now: clock.now } })
    const send = { query: 'mutation { sendEmail(to: "a@example.com") }' }
    await client.post(send, { 'idempotency-key': 'mail-1' })
    clock.advance(29_999)
    const replayed = await client.post(send, { 'idempotency-key': 'mail-1' })
    expect(replayed.headers.get('idempotent-replay')).toBe('true')
    clock.advance(1)
    await client.post(send, { 'idempotency-key': 'mail-1' })
    expect(resolvers.sendEmail).toHaveBeenCalledTimes(2)
  })

  it('reads a code-first ttl as a duration (number of milliseconds or a string)', async () => {
    const clock = createClock()
    const { schema, pay } = codeFirstSchema({ ttl: '1m' })
    const { client } = await setup({ schema, engine: { now: clock.now } })
    const request = { query: 'mutation { pay(amount: 3) }' }
    await client.post(request, { 'idempotency-key': 'pay-1' })
    clock.advance(59_999)
    await client.post(request, { 'idempotency-key': 'pay-1' })
    expect(pay).toHaveBeenCalledTimes(1)
    clock.advance(1)
    await client.post(request, { 'idempotency-key': 'pay-1' })
    expect(pay).toHaveBeenCalledTimes(2)
  })

  it('keeps a mutation with several root fields as one record, required if any field is, with the shortest ttl', async () => {
    const clock = createClock()
    const { client, resolvers, store } = await setup({ engine: { now: clock.now } })
    const both = { query: 'mutation { chargeCard(amount: 9) sendEmail(to: "a@example.com") }' }
    const withoutKey = await client.post(both)
    expect(withoutKey.status).toBe(400)
    expect(resolvers.chargeCard).not.toHaveBeenCalled()
    expect(resolvers.sendEmail).not.toHaveBeenCalled()

    await client.post(both, { 'idempotency-key': 'both-1' })
    expect(store.claim).toHaveBeenCalledTimes(1)
    expect(JSON.parse(store.claim.mock.calls[0]![0].scope)).toEqual(['', 'chargeCard,sendEmail'])
    clock.advance(29_999)
    await client.post(both, { 'idempotency-key': 'both-1' })
    expect(resolvers.chargeCard).toHaveBeenCalledTimes(1)
    clock.advance(1) // sendEmail's 30 s, not chargeCard's 60 s
    await client.post(both, { 'idempotency-key': 'both-1' })
    expect(resolvers.chargeCard).toHaveBeenCalledTimes(2)
  })

  it('counts root fields reached through fragments and ignores skipped ones', async () => {
    const { client, resolvers } = await setup()
    const throughFragment = await client.post({
      query: 'mutation { ...Pay } fragment Pay on Mutation { chargeCard(amount: 1) }',
    })
    expect(throughFragment.json.errors[0].extensions.code).toBe('IDEMPOTENCY_KEY_REQUIRED')
    const skipped = await client.post({
      query:
        'mutation ($no: Boolean!) { chargeCard(amount: 1) @skip(if: $no) createOrder(item: "a") { id } }',
      variables: { no: true },
    })
    expect(skipped.status).toBe(200)
    expect(resolvers.createOrder).toHaveBeenCalledTimes(1)
    expect(resolvers.chargeCard).not.toHaveBeenCalled()
  })

  it("deduplicates only marked mutations in mode 'marked'", async () => {
    const { client, resolvers, store } = await setup({ plugin: { mode: 'marked' } })
    const unmarked = { query: 'mutation { createOrder(item: "a") { id } }' }
    await client.post(unmarked, { 'idempotency-key': 'u-1' })
    await client.post(unmarked, { 'idempotency-key': 'u-1' })
    expect(resolvers.createOrder).toHaveBeenCalledTimes(2)
    expect(store.claim).not.toHaveBeenCalled()
    const marked = { query: 'mutation { sendEmail(to: "a@example.com") }' }
    await client.post(marked, { 'idempotency-key': 'm-1' })
    await client.post(marked, { 'idempotency-key': 'm-1' })
    expect(resolvers.sendEmail).toHaveBeenCalledTimes(1)
  })

  it("lets a field marked required: false run without a key over the engine's required: true", async () => {
    const { schema, pay } = codeFirstSchema({ required: false })
    const { client, store } = await setup({ schema, engine: { required: true } })
    const reply = await client.post({ query: 'mutation { pay(amount: 3) }' })
    expect(reply.json).toEqual({ data: { pay: 3 } })
    expect(pay).toHaveBeenCalledTimes(1)
    expect(store.claim).not.toHaveBeenCalled()
    // Decided without the engine: plain Envelop's execute answers at once, with no promise.
    const getEnveloped = envelop({
      plugins: [
        useEngine({ parse, validate, execute, subscribe, specifiedRules }),
        useSchema(schema),
        useIdempotency({
          idempotency: createIdempotency({ store: createMemoryStore(), required: true }),
        }),
      ],
    })
    const enveloped = getEnveloped({})
    const result = enveloped.execute({
      schema: enveloped.schema,
      document: enveloped.parse('mutation { pay(amount: 4) }'),
      contextValue: {},
    })
    expect(result).not.toBeInstanceOf(Promise)
    expect(result).toMatchObject({ data: { pay: 4 } })
  })

  it("applies the engine's required option to unmarked mutations", async () => {
    const { client, resolvers } = await setup({ engine: { required: true } })
    const reply = await client.post({ query: 'mutation { createOrder(item: "a") { id } }' })
    expect(reply.json.errors[0].extensions.code).toBe('IDEMPOTENCY_KEY_REQUIRED')
    expect(resolvers.createOrder).not.toHaveBeenCalled()
  })

  it.each([
    [
      'a code-first ttl that is not a duration',
      codeFirstSchema({ ttl: 'soon' }).schema,
      /ttl on Mutation\.pay/,
    ],
    [
      'an unknown code-first option',
      codeFirstSchema({ requird: true }).schema,
      /unknown option\(s\) requird/,
    ],
    [
      'a code-first required that is not a boolean',
      codeFirstSchema({ required: 'yes' }).schema,
      /must be a boolean/,
    ],
    [
      'a negative SDL ttl',
      createSchema({
        typeDefs: [
          idempotentDirectiveTypeDefs,
          'type Query { ok: String } type Mutation { pay: Int @idempotent(ttl: -1) }',
        ],
      }),
      /@idempotent\(ttl:\) on Mutation\.pay must be a non-negative whole number of seconds/,
    ],
  ])('rejects %s when the server is created, naming the field', (_name, schema, message) => {
    expect(() => createFixture({ schema })).toThrow(message)
  })

  it('rejects a field that declares its options both as a directive and as extensions', () => {
    const schema = createSchema({
      typeDefs: [
        idempotentDirectiveTypeDefs,
        'type Query { ok: String } type Mutation { pay: Int @idempotent(required: true) }',
      ],
    })
    const pay = schema.getMutationType()!.getFields().pay!
    Object.assign(pay, { extensions: { idempotency: { required: true } } })
    expect(() => createFixture({ schema })).toThrow(
      /Mutation\.pay declares its idempotency options twice/,
    )
  })

  it('rejects an unknown mode and a missing engine when the plugin is created', () => {
    expect(() => createFixture({ plugin: { mode: 'some' as never } })).toThrow(
      /mode must be 'all' or 'marked'/,
    )
    expect(() => useIdempotency({} as never)).toThrow(/needs `idempotency`/)
  })
})

describeGraphQLSchemaCases(yogaHost)
