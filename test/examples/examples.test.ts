import { type ChildProcess, spawn } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { once } from 'node:events'
import { createInterface } from 'node:readline'
import { describe, expect, it, type TestContext } from 'vitest'

const root = new URL('../../', import.meta.url)

/**
 * Starts an npm script; returns the process and a reader of its output. The process group is
 * killed when `test` finishes (its own hook: these tests run concurrently).
 */
function start(test: TestContext, script: string, env: Record<string, string> = {}) {
  // Its own process group: npm starts tsx, which starts node, and killing npm alone would
  // leave the server running after the test.
  const child = spawn('npm', ['run', '--silent', script], {
    cwd: root,
    env: { ...process.env, NO_COLOR: '1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  })
  test.onTestFinished(() => {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL')
    } catch {
      // The group has exited already.
    }
  })
  let output = ''
  child.stdout?.on('data', (chunk) => {
    output += chunk
  })
  child.stderr?.on('data', (chunk) => {
    output += chunk
  })
  return { child, output: () => output }
}

/** Resolves with the URL the server prints once it listens (its readiness signal). */
async function listeningUrl(child: ChildProcess): Promise<string> {
  const lines = createInterface({ input: child.stdout! })
  for await (const line of lines) {
    const match = /listening on (http:\/\/\S+)/.exec(line)
    if (match) return match[1]!
  }
  throw new Error(`the server exited before listening (code ${child.exitCode})`)
}

async function post(url: string, key: string, body: unknown) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify(body),
  })
  return {
    status: response.status,
    replay: response.headers.get('idempotent-replay'),
    json: await response.json(),
  }
}

describe.concurrent('the example servers', () => {
  it('the tRPC example charges once for a key sent twice and replays the second', async (test) => {
    const { child } = start(test, 'example:trpc', { PORT: '0' })
    const url = await listeningUrl(child)
    const orderId = `example-${randomUUID()}`
    const key = randomUUID()
    const body = { orderId, amount: 1234, currency: 'EUR' }
    const first = await post(`${url}/charge`, key, body)
    const second = await post(`${url}/charge`, key, body)
    expect(first.status).toBe(200)
    expect(first.replay).toBeNull()
    expect(second).toMatchObject({ status: 200, replay: 'true' })
    expect(second.json).toEqual(first.json)
    const list = await (await fetch(`${url}/charges`)).json()
    const rows = list.result.data.filter((row: { orderId: string }) => row.orderId === orderId)
    expect(rows).toHaveLength(1)
  }, 60_000)

  it.for([
    ['Yoga', 'example:yoga'],
    ['Apollo Server', 'example:apollo'],
  ] as const)(
    'the %s example charges once for a key sent twice and replays the second',
    { timeout: 60_000 },
    async ([, script], test) => {
      const { child } = start(test, script, { PORT: '0' })
      const url = await listeningUrl(child)
      const orderId = `example-${randomUUID()}`
      const key = randomUUID()
      const body = {
        query:
          'mutation ($o: String!) { charge(orderId: $o, amount: 1234, currency: "EUR") { id } }',
        variables: { o: orderId },
      }
      const first = await post(url, key, body)
      const second = await post(url, key, body)
      expect(first.status).toBe(200)
      expect(first.json.data.charge.id).toEqual(expect.any(Number))
      expect(second).toMatchObject({ status: 200, replay: 'true' })
      expect(second.json).toEqual(first.json)
      const list = await post(url, randomUUID(), { query: '{ charges { orderId } }' })
      const rows = list.json.data.charges.filter(
        (row: { orderId: string }) => row.orderId === orderId,
      )
      expect(rows).toHaveLength(1)
    },
  )

  it.for([
    ['Hono', 'example:hono'],
    ['Express', 'example:express'],
  ] as const)(
    'the %s example charges once for a key sent twice and replays the second',
    { timeout: 60_000 },
    async ([, script], test) => {
      const { child } = start(test, script, { PORT: '0' })
      const url = await listeningUrl(child)
      const orderId = `example-${randomUUID()}`
      const key = randomUUID()
      const body = { orderId, amount: 1234, currency: 'EUR' }
      const first = await post(`${url}/charges`, key, body)
      const second = await post(`${url}/charges`, key, body)
      expect(first).toMatchObject({ status: 201, replay: null })
      expect(second).toMatchObject({ status: 201, replay: 'true' })
      expect(second.json).toEqual(first.json)
      const list = (await (await fetch(`${url}/charges`)).json()) as { orderId: string }[]
      expect(list.filter((row) => row.orderId === orderId)).toHaveLength(1)
    },
  )

  it('the client example retries a lost response and gets the replay', async (test) => {
    const { child, output } = start(test, 'example:client')
    const [code] = await once(child, 'exit')
    const text = output()
    expect(text).not.toMatch(/Error/)
    // Each transport's retry was answered by the replay, and each charge ran once.
    expect(text.match(/retry answered 200, Idempotent-Replay: true/g), text).toHaveLength(2)
    expect(text).toContain('(charges run: 1)')
    expect(text).toContain('(charges run: 2)')
    expect(code).toBe(0)
  })
})

describe('the Next.js route handler example', () => {
  it('runs a charge POSTed twice with one key once, and answers a keyless POST 400', async () => {
    const route = await import('../../examples/next-route')
    const send = (key?: string) =>
      route.POST(
        new Request('http://app.test/api/charges', {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            ...(key ? { 'idempotency-key': key } : {}),
          },
          body: JSON.stringify({ orderId: 'o-1', amount: 500 }),
        }),
      )
    const first = await send('k-next')
    const second = await send('k-next')
    expect(second.headers.get('idempotent-replay')).toBe('true')
    const charge = await first.json()
    expect(await second.json()).toEqual(charge)
    // A new key is a new charge: the one before ran once.
    expect(await (await send('k-next-2')).json()).toMatchObject({ id: charge.id + 1 })
    expect((await send()).status).toBe(400)
  })
})

describe('npm run demo', () => {
  it('plays the story through every adapter, exits 0 and shows one charge per key', async (test) => {
    const { child, output } = start(test, 'demo')
    const [code] = await once(child, 'exit')
    const text = output()
    expect(text, text).toContain('every expectation held')
    for (const adapter of ['tRPC', 'GraphQL Yoga', 'Apollo Server', 'Hono', 'Express']) {
      expect(text).toMatch(new RegExp(`^${adapter}$`, 'm'))
    }
    expect(text).toMatch(
      /10 charges for 10 keys, from \d+ charge requests: exactly one charge per key/,
    )
    expect(text.match(/Idempotent-Replay: true/g)).toHaveLength(5)
    expect(text.match(/422 {2}KEY_REUSED/g)).toHaveLength(5)
    // The retried charge as OpenTelemetry recorded it: one execution (the provider's span
    // under it), the 409 to the early retry, the replay.
    const tree = text.slice(text.indexOf('trace of the retried charge'))
    expect(tree).toMatch(/^ {2}idempotency charge {2}executed/m)
    expect(tree).toMatch(/^ {2}├─ payment provider/m)
    expect(tree).toMatch(/^ {2}idempotency charge {2}conflict/m)
    expect(tree).toMatch(/^ {2}idempotency charge {2}replayed/m)
    expect(code).toBe(0)
  }, 120_000)
})
