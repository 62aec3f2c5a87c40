import { PGlite } from '@electric-sql/pglite'
import { drizzle } from 'drizzle-orm/pglite'
import { afterAll } from 'vitest'
import { idempotencyKeys } from '../../src/stores/drizzle'
import { describeStoreConformance } from './conformance'
import { describeDrizzleBehaviour } from './drizzle-behaviour'
import { statementCounter, useTestTables } from './drizzle-fixtures'

// One PGlite for the file: a new one takes seconds to start.
const client = new PGlite()
afterAll(() => client.close())
// A schema-typed database, as users write it: the store must accept it.
const db = drizzle({ client, schema: { idempotencyKeys } })
const counter = statementCounter()
const countedDb = drizzle({ client, logger: counter.logger })
const tables = useTestTables(() => db, 'im_test_pglite')

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
