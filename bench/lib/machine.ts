import { cpus, loadavg, totalmem } from 'node:os'

export interface Machine {
  date: string
  cpuModel: string
  cores: number
  memoryGiB: number
  node: string
  platform: string
  /** 1-minute load average when the run started: above the core count, other work shared the CPU. */
  loadAverageAtStart: number
}

export function describeMachine(): Machine {
  return {
    date: new Date().toISOString(),
    cpuModel: cpus()[0]?.model.trim() ?? 'unknown',
    cores: cpus().length,
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    platform: `${process.platform}-${process.arch}`,
    loadAverageAtStart: Math.round(loadavg()[0]! * 100) / 100,
  }
}
