/**
 * End to end over real sockets on 127.0.0.1: a tRPC mutation (standalone Node adapter) and a
 * Yoga mutation (node:http) that each insert one order row, measured side by side in one process:
 *
 * - plain: the mutation without the middleware/plugin;
 * - ours: with it, a first execution (new key) and a replay (recorded key), the replay answered
 *   by default from the engine's replay cache, and once more with the cache off (`replayCache:
 *   false`), read from the store;
 * - floor: the same mutation wrapped in hand-written minimal SQL instead: one statement that
 *   claims the key or returns its record, the business insert, one completing update; a replay
 *   is answered from the record that single claim statement returns. No fingerprint, lease
 *   token, expiry, takeover or error recording: the least SQL that still runs a key once.
 *
 * Every statement commits on its own with the server's normal (durable) commit.
 */
import type { Library } from '../lib/build'
import type { PgDatabase as Database } from '../lib/database'
import { type Budget, compare, round, type VariantStats } from '../lib/measure'
import { createFloor, createFloorTables, insertOrder, type OrderInput, type Query } from './floor'
import { httpRatios } from './http-ratios'
import { insertWithDrizzle, onConnectionOf, ordersTable, startHttpServers } from './http-servers'

export interface HttpResult {
  backend: string
  settings: Record<string, string>
  variants: VariantStats[]
  /** SQL statements per request (store, business and floor statements together). */
  statementsPerRequest: Record<string, number>
  /**
   * Round trips to PostgreSQL per request, BEGIN, SAVEPOINT and COMMIT included (writes after an answer;
   * absent on PGlite).
   */
  roundTripsPerRequest?: Record<string, number>
  /**
   * tRPC in transactional mode (claim, the handler's insert and the completion in one
   * transaction): its first execution relative to the floor and to ours outside transactional
   * mode, median of rounds and ratio of means.
   */
  transactional: TransactionalRatios & { ofMeans: TransactionalRatios }
  /**
   * The tRPC floor on a table of the SPEC's record (its eight columns, the `expires_at` index,
   * the same parameters as the store's statements) relative to the floor, and ours relative to
   * it: how much of ours ÷ floor the record's shape accounts for.
   */
  specRecordFloor: {
    vsFloor: number
    oursVsIt: number
    ofMeans: { vsFloor: number; oursVsIt: number }
  }
  /** The floor's A/A control: the same requests under a second name, ÷ the floor. */
  floorAgainVsFloor: { medianOfRounds: number; ofMeans: number }
  /**
   * Per adapter: time per request relative to the plain mutation and to the floor, each the
   * median over the rounds of the quotient within a round (`pairedRatio`); `ofMeans` holds
   * the same quotients of the whole run's mean times.
   */
  ratios: Record<'tRPC' | 'Yoga', HttpRatios & { ofMeans: HttpRatios }>
}

export interface TransactionalRatios {
  /**
   * ÷ the transactional floor (BEGIN, claim, insert, complete, COMMIT, hand-written), the handler
   * inserting with the floor's own prepared statement on the transaction's connection.
   */
  firstVsTxFloor: number
  /** The same with the handler's insert built by drizzle (named with `.prepare()`). */
  drizzleVsTxFloor: number
  /** The same with the handler's insert sent unprepared (drizzle without `.prepare()`). */
  unpreparedVsTxFloor: number
  /** ÷ the floor outside a transaction, and ÷ ours outside transactional mode. */
  firstVsFloor: number
  firstVsOurs: number
  /**
   * The transactional floor as the mode runs it (a drizzle transaction, the SPEC's record, a
   * SAVEPOINT sent with the claim) ÷ the transactional floor, and ours ÷ it: what the mode's
   * shape costs any code, and what the library adds to it.
   */
  modeFloorVsTxFloor: number
  firstVsModeFloor: number
}

export interface HttpRatios {
  firstVsPlain: number
  replayVsPlain: number
  firstVsFloor: number
  replayVsFloor: number
  /** The replay with the replay cache off (read from the store). */
  storeReplayVsFloor: number
  floorFirstVsPlain: number
}

const replayKeys = 50

export async function benchHttp(
  lib: Library,
  database: Database,
  budget: Budget,
): Promise<HttpResult> {
  const { schema, query } = database
  // Counts the statements this section sends itself; the store's are counted by drizzle.
  let ownStatements = 0
  const counted =
    (send: Query): Query =>
    (text, params) => {
      ownStatements++
      return send(text, params)
    }
  const run = counted(query)
  await createFloorTables(query, schema)
  const table = lib.drizzle.defineIdempotencyTable('records_http', schema)
  const store = lib.drizzle.createDrizzleStore(database.db, { table })
  await store.ensureTable()
  const idempotency = lib.core.createIdempotency({ store })
  // The same engine with every retry read from the store.
  const storeRead = lib.core.createIdempotency({ store, replayCache: false })
  // Transactional mode: the handler writes through the transaction its record commits in.
  const transactional = lib.core.createIdempotency({ store })
  const orders = ordersTable(schema)
  const insertThroughDrizzle = (
    tx: Database['db'],
    input: OrderInput,
    options?: { prepared?: boolean },
  ) => insertWithDrizzle(orders, tx, input, options)

  const placeOrder = (input: OrderInput) => insertOrder(run, schema, input)
  const floorCall = createFloor(schema)
  const floor = (key: string, input: OrderInput, onSpecRecord = false) =>
    floorCall(run, key, () => placeOrder(input), onSpecRecord)
  // The transactional floor: BEGIN, the floor's claim, the insert, its completion, COMMIT, every
  // statement prepared, on one connection.
  const floorInTransaction = (key: string, input: OrderInput) =>
    database.transaction((tx) => {
      const inTransaction = counted(tx)
      return floorCall(inTransaction, key, () => insertOrder(inTransaction, schema, input))
    })
  // The same as transactional mode runs it, hand-written: in a drizzle transaction, on the
  // SPEC's record, a SAVEPOINT sent behind the claim (in its round trip, as the mode sends it)
  // before the insert. Not in it: the bound on a duplicate's lock wait, the guard against a
  // closing connection, the time bounds, the engine and the adapter.
  const floorAsTransactionalMode = (key: string, input: OrderInput) =>
    database.db.transaction((tx) => {
      const connection = onConnectionOf(tx)
      const send = counted(connection)
      let claimed = false
      const withSavepoint: Query = <Row>(text: string, params: unknown[]) => {
        if (claimed) return send<Row>(text, params)
        claimed = true
        // Both asked for in this tick: postgres.js writes them together, the claim first. The
        // SAVEPOINT is not counted as a statement, as ours is not (drizzle's logger skips it).
        const answer = send<Row>(text, params)
        const savepoint = connection('savepoint floor_handler', [])
        return Promise.all([answer, savepoint]).then(([rows]) => rows)
      }
      return floorCall(withSavepoint, key, () => insertOrder(send, schema, input), true)
    })

  const servers = await startHttpServers(lib, schema, {
    counted,
    engines: { idempotency, storeRead, transactional },
    placeOrder,
    floor,
    floorInTransaction,
    floorAsTransactionalMode,
    insertThroughDrizzle,
  })
  try {
    const requests = httpRequests(servers.map((server) => server.url))

    await recordReplays(requests)
    const statementsPerRequest: Record<string, number> = {}
    const roundTripsPerRequest: Record<string, number> = {}
    for (const [name, request] of Object.entries(requests)) {
      // Twice: the first pass prepares each statement on the connections it lands on.
      for (const pass of [0, 1]) {
        const statements = ownStatements + database.statements.count
        const roundTrips = database.roundTrips.count
        const times = 10
        for (let i = 0; i < times; i++) await request(1_000_000 + pass * times + i)
        statementsPerRequest[name] = round(
          (ownStatements + database.statements.count - statements) / times,
          2,
        )
        roundTripsPerRequest[name] = round((database.roundTrips.count - roundTrips) / times, 2)
      }
    }

    const variants = await compare(
      Object.entries(requests).map(([name, op]) => ({ name, op })),
      { ...budget, latencies: true },
    )
    return {
      backend: database.backend,
      settings: database.settings,
      variants,
      statementsPerRequest,
      ...(database.backend === 'postgres' ? { roundTripsPerRequest } : {}),
      ...httpRatios(variants),
    }
  } finally {
    await Promise.all(servers.map((server) => server.close()))
  }
}

/** The section's requests by variant name, on the servers at `urls` (see ./http-servers.ts). */
function httpRequests(urls: string[]) {
  const [trpcUrl, yogaPlainUrl, yogaIdempotentUrl, yogaStoreReadUrl] = urls
  const post = async (url: string, body: string, key?: string) => {
    const response = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json',
        ...(key === undefined ? {} : { 'idempotency-key': key }),
      },
      body,
    })
    const text = await response.text()
    if (response.status !== 200 || text.includes('"errors"')) {
      throw new Error(`bench: ${url} answered ${response.status}: ${text.slice(0, 300)}`)
    }
    return response
  }
  const order = { item: 'standing desk', quantity: 2 }
  const trpcBody = JSON.stringify(order)
  const gql = (field: string) =>
    JSON.stringify({
      query: `mutation ($item: String!, $quantity: Int!) { ${field}(item: $item, quantity: $quantity) { id item quantity } }`,
      variables: order,
    })
  const yogaBody = gql('createOrder')
  const yogaFloorBody = gql('createOrderFloor')

  const requests: Record<string, (i: number) => Promise<Response>> = {
    'tRPC plain': () => post(`${trpcUrl}/plain`, trpcBody),
    'tRPC ours: first execution': (i) => post(`${trpcUrl}/idempotent`, trpcBody, `t-first-${i}`),
    'tRPC ours: replay': (i) =>
      post(`${trpcUrl}/idempotent`, trpcBody, `t-replay-${i % replayKeys}`),
    'tRPC ours: replay, cache off': (i) =>
      post(`${trpcUrl}/storeRead`, trpcBody, `t-replay-${i % replayKeys}`),
    'tRPC ours, transactional: first execution': (i) =>
      post(`${trpcUrl}/transactional`, trpcBody, `t-tx-first-${i}`),
    'tRPC ours, transactional, drizzle insert: first execution': (i) =>
      post(`${trpcUrl}/transactionalDrizzle`, trpcBody, `t-tx-drizzle-${i}`),
    'tRPC ours, transactional, unprepared insert: first execution': (i) =>
      post(`${trpcUrl}/transactionalUnprepared`, trpcBody, `t-tx-unprepared-${i}`),
    'tRPC floor, transactional: first execution': (i) =>
      post(`${trpcUrl}/transactionalFloor`, trpcBody, `t-tx-floor-${i}`),
    'tRPC floor, transactional as the mode runs it: first execution': (i) =>
      post(`${trpcUrl}/transactionalModeFloor`, trpcBody, `t-tx-mode-floor-${i}`),
    'tRPC floor: first execution': (i) => post(`${trpcUrl}/floor`, trpcBody, `t-floor-${i}`),
    // An A/A control: the floor again, under another name. Its quotient to the floor is what
    // the machine's noise alone makes of two equal variants in this run.
    'tRPC floor: first execution, again': (i) =>
      post(`${trpcUrl}/floor`, trpcBody, `t-floor-again-${i}`),
    'tRPC floor, SPEC record: first execution': (i) =>
      post(`${trpcUrl}/specFloor`, trpcBody, `t-spec-floor-${i}`),
    'tRPC floor: replay': (i) =>
      post(`${trpcUrl}/floor`, trpcBody, `t-floor-replay-${i % replayKeys}`),
    'Yoga plain': () => post(yogaPlainUrl!, yogaBody),
    'Yoga ours: first execution': (i) => post(yogaIdempotentUrl!, yogaBody, `y-first-${i}`),
    'Yoga ours: replay': (i) => post(yogaIdempotentUrl!, yogaBody, `y-replay-${i % replayKeys}`),
    'Yoga ours: replay, cache off': (i) =>
      post(yogaStoreReadUrl!, yogaBody, `y-replay-${i % replayKeys}`),
    'Yoga floor: first execution': (i) => post(yogaPlainUrl!, yogaFloorBody, `y-floor-${i}`),
    'Yoga floor: replay': (i) =>
      post(yogaPlainUrl!, yogaFloorBody, `y-floor-replay-${i % replayKeys}`),
  }

  return requests
}

/** Records every replayed key before timing starts, and checks that ours replays (its header). */
async function recordReplays(requests: Record<string, (i: number) => Promise<Response>>) {
  const replaying = Object.entries(requests).filter(([name]) => name.includes('replay'))
  for (let i = 0; i < replayKeys; i++) {
    for (const [, replay] of replaying) await replay(i)
  }
  for (const [name, replay] of replaying) {
    const response = await replay(0)
    if (name.includes('ours') && response.headers.get('idempotent-replay') !== 'true') {
      throw new Error(`bench: ${name} did not replay a recorded key`)
    }
  }
}
