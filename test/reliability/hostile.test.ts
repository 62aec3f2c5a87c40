import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { databaseUrl, testSchema } from '../support/env'
import { type App, startApp } from './fixtures/app'
import {
  connect,
  createStore,
  dropSchema,
  executionsOf,
  recordsOf,
  resetSchema,
} from './fixtures/database'
import { createHttpClient, RawJson, report } from './fixtures/http'
import { type Adapter, callOrder } from './fixtures/storm'

const schema = testSchema('im_rel_hostile')
const table = 'keys'
const where = databaseUrl
  ? 'on PostgreSQL [postgres]'
  : 'on PGlite (DATABASE_URL is not set: the real-PostgreSQL run is skipped)'

const invalid: Record<Adapter, string> = {
  trpc: 'KEY_INVALID',
  graphql: 'IDEMPOTENCY_KEY_INVALID',
  apollo: 'IDEMPOTENCY_KEY_INVALID',
}
const reused: Record<Adapter, string> = {
  trpc: 'KEY_REUSED',
  graphql: 'IDEMPOTENCY_KEY_REUSED',
  apollo: 'IDEMPOTENCY_KEY_REUSED',
}

/** Header values a client (or an attacker) may send; node's client refuses raw control bytes. */
const badHeaders: [string, string | string[]][] = [
  ['an empty key', ''],
  ['a key of 256 characters', 'k'.repeat(256)],
  ['a tab inside the key', 'tab\there'],
  ['a Latin-1 letter', 'caf\u00e9'],
  ['UTF-8 bytes', Buffer.from('ключ-1', 'utf8').toString('latin1')],
  ['SQL with spaces', "'; drop table x; --"],
  ['a list of two keys', 'a, b'],
  ['the header twice with two keys', ['key-one', 'key-two']],
  ['a broken structured-field string', '"unterminated'],
  ['a quoted key with a space', '"a b"'],
]
/** Keys in the tRPC input / GraphQL argument, where any JSON string can arrive. */
const badInputKeys: [string, string][] = [
  ['an empty key', ''],
  ['a key of 256 characters', 'k'.repeat(256)],
  ['a NUL byte', 'a\u0000b'],
  ['a line break', 'line\nbreak'],
  ['Cyrillic', 'ключ'],
  ['an emoji', '🔑-1'],
  ['SQL with spaces', "'; drop table x; --"],
]
const adapters: Adapter[] = ['trpc', 'graphql']

describe(`hostile input through the adapters over HTTP ${where}`, () => {
  const database = connect({ url: databaseUrl, max: 4 })
  const http = createHttpClient()
  let app: App
  let rejected = 0
  let rowsChanged = 0
  beforeAll(async () => {
    await resetSchema(database, schema)
    // A bystander table that SQL in a key must never reach.
    await database.query(`create table "${schema}".x (id int)`)
    const store = await createStore(database.db, schema, table)
    app = await startApp({ db: database.db, schema, store, engine: { maxResponseBytes: 1024 } })
  })
  afterAll(async () => {
    report('hostile keys', { rejectedWith400: rejected, rowsChanged })
    await app.close()
    http.close()
    await dropSchema(database, schema)
    await database.close()
  })

  /** Rows in the records table and the business table: unchanged by anything rejected. */
  const counts = async () => {
    const [row] = await database.query<{ records: number; executions: number }>(
      `select (select count(*)::int from "${schema}"."${table}") as records,
        (select count(*)::int from "${schema}".executions) as executions`,
    )
    return row!
  }
  /** Checks that nothing changed since `before`, and counts any change for the report. */
  const expectUnchanged = async (before: { records: number; executions: number }) => {
    const after = await counts()
    rowsChanged += after.records - before.records + after.executions - before.executions
    expect(after).toEqual(before)
  }

  const headerCases = adapters.flatMap((adapter) =>
    badHeaders.map(([name, value]) => [adapter, name, value] as const),
  )
  it.each(headerCases)(
    'through %s, an Idempotency-Key header with %s gets 400 KEY_INVALID and changes nothing',
    async (adapter, _name, value) => {
      const before = await counts()
      const seen = await callOrder(http, adapter, app.url, value)
      expect(seen).toMatchObject({ status: 400, code: invalid[adapter] })
      expect(seen.message).toMatch(/1-255 visible ASCII/)
      await expectUnchanged(before)
      rejected++
    },
  )

  const inputCases = adapters.flatMap((adapter) =>
    badInputKeys.map(([name, value]) => [adapter, name, value] as const),
  )
  it.each(inputCases)(
    'through %s, a key in the input with %s gets 400 KEY_INVALID and changes nothing',
    async (adapter, _name, value) => {
      const before = await counts()
      const seen = await callOrder(http, adapter, app.url, undefined, { inputKey: value })
      expect(seen).toMatchObject({ status: 400, code: invalid[adapter] })
      await expectUnchanged(before)
      rejected++
    },
  )

  it.each(adapters)(
    'through %s, a header key and an input key that differ get 400 KEY_INVALID and change nothing',
    async (adapter) => {
      const before = await counts()
      const seen = await callOrder(http, adapter, app.url, 'key-a', { inputKey: 'key-b' })
      expect(seen).toMatchObject({ status: 400, code: invalid[adapter] })
      await expectUnchanged(before)
      rejected++
    },
  )

  it('a tRPC key that is not a string gets 400 KEY_INVALID and changes nothing', async () => {
    const before = await counts()
    const seen = await callOrder(http, 'trpc', app.url, undefined, { inputKey: 42 })
    expect(seen).toMatchObject({ status: 400, code: 'KEY_INVALID' })
    await expectUnchanged(before)
    rejected++
  })

  it.each(adapters)(
    'through %s, a valid key that looks like SQL is stored verbatim as data and replayed',
    async (adapter) => {
      const key = `';drop/**/table/**/"${schema}".x;--${adapter}`
      const first = await callOrder(http, adapter, app.url, key)
      expect(first).toMatchObject({ status: 200, replay: false })
      const retry = await callOrder(http, adapter, app.url, key)
      expect(retry).toMatchObject({ status: 200, replay: true, value: first.value })
      expect((await recordsOf(database, schema, table, key)).map((r) => r.key)).toEqual([key])
      expect(await database.query(`select count(*)::int as n from "${schema}".x`)).toEqual([
        { n: 0 },
      ])
      expect(await executionsOf(database, schema, key)).toHaveLength(1)
    },
  )

  it.each(adapters)(
    'through %s, a 2 MiB input is fingerprinted, not stored: it replays, and another 2 MiB input under its key gets 422',
    async (adapter) => {
      const key = `huge-${adapter}`
      const item = 'x'.repeat(2 * 1024 * 1024)
      const first = await callOrder(http, adapter, app.url, key, { item })
      expect(first).toMatchObject({ status: 200, replay: false, value: { size: item.length } })
      const retry = await callOrder(http, adapter, app.url, key, { item })
      expect(retry).toMatchObject({ status: 200, replay: true, value: first.value })
      const other = await callOrder(http, adapter, app.url, key, { item: `${item.slice(1)}y` })
      expect(other).toMatchObject({ status: 422, code: reused[adapter] })
      const [row] = await database.query<{ fingerprint: number; response: number }>(
        `select length(fingerprint) as fingerprint, length(response) as response
          from "${schema}"."${table}" where key = '${key}'`,
      )
      // A SHA-256 in base64url: the input itself is never stored.
      expect(row!.fingerprint).toBe(43)
      expect(row!.response).toBeLessThan(1024)
      expect(await executionsOf(database, schema, key)).toHaveLength(1)
    },
  )

  it('a tRPC input nested 50,000 levels deep is fingerprinted like any other: it runs once and its retry replays', async () => {
    const depth = 50_000
    const key = 'deep-input'
    const body = new RawJson(`{"item":"x","deep":${'['.repeat(depth)}1${']'.repeat(depth)}}`)
    const first = await http.post(`${app.url}/trpc/order.create`, body, { 'idempotency-key': key })
    expect(first.status).toBe(200)
    const retry = await http.post(`${app.url}/trpc/order.create`, body, { 'idempotency-key': key })
    expect(retry.status).toBe(200)
    expect(retry.headers['idempotent-replay']).toBe('true')
    expect(JSON.parse(retry.text)).toEqual(JSON.parse(first.text))
    // The same depth with another leaf is another payload under the same key.
    const other = new RawJson(`{"item":"x","deep":${'['.repeat(depth)}2${']'.repeat(depth)}}`)
    const reused = await http.post(`${app.url}/trpc/order.create`, other, {
      'idempotency-key': key,
    })
    expect(reused.status).toBe(422)
    expect(await executionsOf(database, schema, key)).toHaveLength(1)
    report('input nested 50,000 levels deep', {
      depth,
      statuses: [first.status, retry.status, reused.status].join(),
    })
  })
})

describe(`responses that cannot be stored or serialized, through tRPC ${where}`, () => {
  const database = connect({ url: databaseUrl, max: 4 })
  const http = createHttpClient()
  let app: App
  const responsesSchema = `${schema}_responses`
  beforeAll(async () => {
    await resetSchema(database, responsesSchema)
    const store = await createStore(database.db, responsesSchema, table)
    app = await startApp({
      db: database.db,
      schema: responsesSchema,
      store,
      engine: { maxResponseBytes: 1024 },
    })
  })
  afterAll(async () => {
    await app.close()
    http.close()
    await dropSchema(database, responsesSchema)
    await database.close()
  })

  const order = (key: string, shape: string) =>
    http.trpc(app.url, 'order.create', { item: 'book', shape }, { 'idempotency-key': key })

  it.each([
    ['larger than maxResponseBytes', 'padded'],
    ['with a field no serializer can read', 'unreadable'],
  ])(
    'a response %s is kept as completed-without-body: the retry gets 422 RESPONSE_NOT_STORED and nothing runs twice',
    async (_name, shape) => {
      const key = `response-${shape}`
      const first = await order(key, shape)
      if (shape === 'padded') {
        expect(first).toMatchObject({ status: 200, replay: false })
        expect((first.value as { padding: string }).padding).toHaveLength(4096)
      }
      expect(app.events).toContainEqual(expect.objectContaining({ type: 'not-stored', key }))
      const [record] = await recordsOf(database, responsesSchema, table, key)
      expect(record).toMatchObject({ status: 'completed', response: null })
      const retry = await order(key, shape)
      expect(retry).toMatchObject({ status: 422, code: 'RESPONSE_NOT_STORED' })
      const executions = await executionsOf(database, responsesSchema, key)
      expect(executions).toHaveLength(1)
      report(`response ${shape}`, {
        requests: 2,
        executions: executions.length,
        retryStatus: retry.status,
      })
    },
  )

  it('a response holding a function replays exactly what the first caller got (the function dropped both times)', async () => {
    const first = await order('response-function', 'function')
    expect(first).toMatchObject({ status: 200, replay: false })
    expect(first.value).not.toHaveProperty('callback')
    const retry = await order('response-function', 'function')
    expect(retry).toMatchObject({ status: 200, replay: true, value: first.value })
    expect(await executionsOf(database, responsesSchema, 'response-function')).toHaveLength(1)
  })

  it('a cyclic response gets the retry the same answer as the first caller, and the handler runs once', async () => {
    const first = await order('response-cycle', 'cycle')
    const retry = await order('response-cycle', 'cycle')
    // Without a transformer tRPC cannot write a cycle as JSON: both get that same error.
    expect({ ...retry, replay: false }).toEqual(first)
    expect(await executionsOf(database, responsesSchema, 'response-cycle')).toHaveLength(1)
  })
})
