import { drizzle } from 'drizzle-orm/postgres-js'
import postgres from 'postgres'
import { afterAll, describe } from 'vitest'
import { useTestTables } from '../stores/drizzle-fixtures'
import { databaseUrl, testSchema } from '../support/env'
import { describeAcceptance } from './acceptance'

const skipped = databaseUrl ? '' : ' (skipped: DATABASE_URL is not set)'

describe.skipIf(!databaseUrl)(`engine on PostgreSQL [postgres]${skipped}`, () => {
  // Several connections, so the duplicates race inside the server.
  const client = postgres(databaseUrl ?? '', { max: 10, onnotice: () => {} })
  afterAll(() => client.end())
  const db = drizzle({ client })
  const schema = testSchema('im_test_engine_postgres')
  const tables = useTestTables(() => db, schema)

  describeAcceptance({
    name: 'drizzle on postgres.js [postgres]',
    db: () => db,
    schema,
    createStore: () => tables.createStore(),
    concurrency: 100,
  })
})
