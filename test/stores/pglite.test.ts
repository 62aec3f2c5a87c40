import { PGlite } from '@electric-sql/pglite'
import { drizzle } from 'drizzle-orm/pglite'
import { afterAll } from 'vitest'
import { idempotencyKeys } from '../../src/stores/drizzle'
import { describeAcceptance } from '../core/acceptance'
import { describeStoreConformance } from './conformance'
import { describeDrizzleBehaviour } from './drizzle-behaviour'
import { statementCounter, useTestTables } from './drizzle-fixtures'

// Everything that runs on PGlite shares this file's one instance: a new one takes seconds to
// start (much longer on a busy machine).
const client = new PGlite()
afterAll(() => client.close())
// A schema-typed database, as users write it: the store must accept it.
const db = drizzle({ client, schema: { idempotencyKeys } })
const counter = statementCounter()
const countedDb = drizzle({ client, logger: counter.logger })
const schema = 'im_test_pglite'
const tables = useTestTables(() => db, schema)

describeStoreConformance({
  name: 'drizzle on PGlite',
  createStore: () => tables.createStore(),
  concurrency: 100,
})

describeDrizzleBehaviour({
  name: 'PGlite',
  createCountedStore: () => tables.createStore(countedDb),
  counter,
  db: () => db,
})

describeAcceptance({
  name: 'drizzle on PGlite',
  db: () => db,
  schema,
  createStore: () => tables.createStore(),
  concurrency: 100,
})
