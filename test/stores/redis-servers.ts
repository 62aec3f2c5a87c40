import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { closedPort } from './redis-fixtures'

/** Whether this machine can start Redis servers of its own (`redis-server` and `redis-cli`). */
export function canStartRedis(): boolean {
  try {
    execFileSync('redis-server', ['--version'], { stdio: 'ignore' })
    execFileSync('redis-cli', ['--version'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

/** A free TCP port on 127.0.0.1 whose cluster bus port (port + 10000) is free too. */
async function freeClusterPort(): Promise<number> {
  for (;;) {
    const port = await closedPort(0)
    if (port + 10_000 < 65_536 && (await closedPort(port + 10_000).catch(() => 0)) !== 0)
      return port
  }
}

/** Polls `check` until it holds; each try is a real question to the servers, not a wait. */
async function until(what: string, check: () => Promise<boolean>, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await check().catch(() => false)) return
    if (Date.now() > deadline) throw new Error(`redis cluster fixture: ${what} did not happen`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

export interface LocalRedisCluster {
  /** The masters' ports on 127.0.0.1. */
  ports: number[]
  /** One plain client per node (not a cluster client): to see where records landed. */
  nodes: Redis[]
  stop(): Promise<void>
}

function spawnRedis(port: number, dir: string, extra: string[] = []): ChildProcess {
  return spawn(
    'redis-server',
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--dir',
      dir,
      '--save',
      '',
      '--appendonly',
      'no',
      ...extra,
    ],
    { stdio: 'ignore' },
  )
}

async function stopAll(servers: ChildProcess[], dir: string) {
  await Promise.all(
    servers.map(async (server) => {
      if (server.exitCode !== null) return
      server.kill('SIGKILL')
      await once(server, 'exit')
    }),
  )
  rmSync(dir, { recursive: true, force: true })
}

/**
 * A client of `server`, once it answers on `port`. The port was free when it was picked, but
 * another process could have taken it since: the answering server must be this child process,
 * or a test meant for a server of its own would run on someone else's.
 */
async function connected(server: ChildProcess, port: number): Promise<Redis> {
  const node = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 1 })
  node.on('error', () => {})
  try {
    await until('a server answering PING', async () => {
      if (server.exitCode !== null) return false // it could not bind the port: times out below
      if (node.status !== 'ready') await node.connect()
      return (await node.ping()) === 'PONG'
    })
    const pid = /process_id:(\d+)/.exec(await node.info('server'))?.[1]
    if (Number(pid) !== server.pid) {
      throw new Error(`port ${port} is answered by another Redis (pid ${pid}), not the one started`)
    }
  } catch (error) {
    node.disconnect()
    throw error
  }
  return node
}

export interface LocalRedisServer {
  url: string
  /** A plain client of the server, for the test's own commands. */
  admin: Redis
  stop(): Promise<void>
}

/**
 * Starts one Redis server of the test's own (no persistence, in a temporary folder): for tests
 * that change server-wide state, such as `SCRIPT FLUSH`, which must not reach a shared Redis.
 */
export async function startRedisServer(): Promise<LocalRedisServer> {
  const dir = mkdtempSync(join(tmpdir(), 'im-redis-'))
  const port = await closedPort(0)
  const server = spawnRedis(port, dir)
  try {
    const admin = await connected(server, port)
    return {
      url: `redis://127.0.0.1:${port}`,
      admin,
      stop: async () => {
        admin.disconnect()
        await stopAll([server], dir)
      },
    }
  } catch (error) {
    await stopAll([server], dir)
    throw error
  }
}

/**
 * Starts `size` Redis servers in cluster mode (no persistence, in a temporary folder), joins
 * them as masters without replicas, and resolves once every node reports `cluster_state:ok`.
 */
export async function startRedisCluster(size = 3): Promise<LocalRedisCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'im-redis-cluster-'))
  const ports: number[] = []
  for (let i = 0; i < size; i++) ports.push(await freeClusterPort())
  const servers = ports.map((port) =>
    spawnRedis(port, dir, [
      '--cluster-enabled',
      'yes',
      '--cluster-config-file',
      join(dir, `nodes-${port}.conf`),
    ]),
  )
  const nodes: Redis[] = []
  const stop = async () => {
    for (const node of nodes) node.disconnect()
    await stopAll(servers, dir)
  }
  try {
    for (const [i, port] of ports.entries()) nodes.push(await connected(servers[i]!, port))
    execFileSync(
      'redis-cli',
      [
        '--cluster',
        'create',
        ...ports.map((port) => `127.0.0.1:${port}`),
        '--cluster-replicas',
        '0',
        '--cluster-yes',
      ],
      { stdio: 'ignore' },
    )
    for (const node of nodes) {
      await until('cluster_state:ok on every node', async () =>
        String(await node.cluster('INFO')).includes('cluster_state:ok'),
      )
    }
    return { ports, nodes, stop }
  } catch (error) {
    await stop()
    throw error
  }
}
