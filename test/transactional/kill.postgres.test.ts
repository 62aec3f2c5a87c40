import { fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { databaseUrl, testSchema } from '../support/env'
import type { ExecutorConfig, ExecutorMessage } from './child/executor'
import { insertOrder, usePostgres, waitForLockWaiter } from './fixtures'

const skipped = databaseUrl ? '' : ' (skipped: DATABASE_URL is not set)'
const schema = testSchema('im_tx_kill')
const operation = 'orders.create'
const executorScript = fileURLToPath(new URL('./child/executor.ts', import.meta.url))
const repositoryRoot = fileURLToPath(new URL('../..', import.meta.url))

/** Starts the executor process; `inserted` resolves on its IPC message (never a sleep). */
function startExecutor(config: ExecutorConfig) {
  const child = fork(executorScript, [JSON.stringify(config)], {
    cwd: repositoryRoot,
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  const exited = new Promise<NodeJS.Signals | null>((resolve) => {
    child.once('exit', (_code, signal) => resolve(signal))
  })
  const inserted = new Promise<ExecutorMessage>((resolve, reject) => {
    child.once('message', (message: ExecutorMessage) => resolve(message))
    exited.then(() => reject(new Error('the executor exited before it inserted')))
  })
  running.add(child)
  exited.then(() => running.delete(child))
  return { inserted, exited, kill: () => child.kill('SIGKILL') }
}
const running = new Set<ReturnType<typeof fork>>()

describe.skipIf(!databaseUrl)(
  `a transactional executor killed before its commit, on PostgreSQL [postgres]${skipped}`,
  () => {
    const pg = usePostgres(databaseUrl, schema, { max: 4 })
    afterEach(() => {
      for (const child of running) child.kill('SIGKILL')
    })

    it('SIGKILL after the handler inserted leaves neither the row nor a record, and the retry inserts exactly one row', async () => {
      const key = pg.newKey('sigkill')
      const executor = startExecutor({ url: databaseUrl!, schema, key, operation, item: 'piano' })
      const { id: uncommittedId } = await executor.inserted
      executor.kill()
      expect(await executor.exited).toBe('SIGKILL')

      expect(await pg.orderCount(key)).toBe(0)
      expect(await pg.recordOf(operation, key)).toBeUndefined()

      // `wait`: should the server not yet have rolled the dead transaction back, the retry's
      // claim waits for that instead of answering 409.
      const idempotency = pg.engine({ concurrency: 'wait', waitTimeout: '20s' })
      const handler = vi.fn(async ({ tx }: { tx: unknown }) =>
        insertOrder(tx, pg.orders, key, 'piano'),
      )
      const request = { key, operation, payload: { item: 'piano' }, transactional: true } as const
      const retry = await idempotency.execute(request, handler)
      const again = await idempotency.execute(request, handler)

      expect(retry).toMatchObject({ replayed: false, value: { item: 'piano' } })
      expect(retry.value.id).not.toBe(uncommittedId)
      expect(again).toEqual({ value: retry.value, replayed: true })
      expect(handler).toHaveBeenCalledTimes(1)
      expect(await pg.ordersOf(key)).toEqual([{ id: retry.value.id, ref: key, item: 'piano' }])
      expect(await pg.recordOf(operation, key)).toMatchObject({ status: 'completed' })
    })

    it('a duplicate blocked on the killed process transaction runs the operation itself once the server rolls it back', async () => {
      const key = pg.newKey('blocked')
      const executor = startExecutor({ url: databaseUrl!, schema, key, operation, item: 'harp' })
      await executor.inserted
      const idempotency = pg.engine({ concurrency: 'wait', waitTimeout: '20s' })
      const handler = vi.fn(async ({ tx }: { tx: unknown }) =>
        insertOrder(tx, pg.orders, key, 'harp'),
      )
      const duplicate = idempotency.execute(
        { key, operation, payload: { item: 'harp' }, transactional: true },
        handler,
      )
      await waitForLockWaiter(pg.db, `"${schema}"."keys"`)

      executor.kill()
      await executor.exited

      expect(await duplicate).toMatchObject({ replayed: false, value: { item: 'harp' } })
      expect(handler).toHaveBeenCalledTimes(1)
      expect(await pg.orderCount(key)).toBe(1)
    })
  },
)
