import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'

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
    const port = await freePort(0)
    if (port + 10_000 < 65_536 && (await freePort(port + 10_000).catch(() => 0)) !== 0) return port
  }
}

async function freePort(port: number): Promise<number> {
  const server = createServer()
  server.listen(port, '127.0.0.1')
  await once(server, 'listening')
  const { port: bound } = server.address() as { port: number }
  server.close()
  await once(server, 'close')
  return bound
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

/**
 * Starts `size` Redis servers in cluster mode (no persistence, in a temporary folder), joins
 * them as masters without replicas, and resolves once every node reports `cluster_state:ok`.
 */
export async function startRedisCluster(size = 3): Promise<LocalRedisCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'im-redis-cluster-'))
  const ports: number[] = []
  for (let i = 0; i < size; i++) ports.push(await freeClusterPort())
  const servers: ChildProcess[] = ports.map((port) =>
    spawn(
      'redis-server',
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        join(dir, `nodes-${port}.conf`),
        '--dir',
        dir,
        '--save',
        '',
        '--appendonly',
        'no',
      ],
      { stdio: 'ignore' },
    ),
  )
  const nodes = ports.map(
    (port) => new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 1 }),
  )
  const stop = async () => {
    for (const node of nodes) node.disconnect()
    await Promise.all(
      servers.map(async (server) => {
        if (server.exitCode !== null) return
        server.kill('SIGKILL')
        await once(server, 'exit')
      }),
    )
    rmSync(dir, { recursive: true, force: true })
  }
  try {
    for (const node of nodes) {
      node.on('error', () => {})
      await until('a node answering PING', async () => {
        if (node.status !== 'ready') await node.connect()
        return (await node.ping()) === 'PONG'
      })
    }
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
