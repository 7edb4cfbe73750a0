/**
 * Finding and ending the processes a test started against one scenario file, however they were
 * started (the CLI, a Node program, the NVML helper those spawn, reparented or not): each reads
 * the simulator through GPUGATE_SIM_SCENARIO, and a test's scenario path is unique to it.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import * as path from 'node:path';
import { isAlive, until } from './processes';
import { repoRoot } from './sim';

/** Where the build puts the NVML helper executable (beside the addon, issue 24). */
export function nvmlHelperPath(): string {
  return path.join(repoRoot(), 'build', 'Release', 'gpugate-nvml-helper');
}

/** True when `fd` of `pid` is open on `file`. */
function holds(pid: number, file: string): boolean {
  try {
    return readdirSync(`/proc/${pid}/fd`).some((fd) => {
      try {
        return readlinkSync(`/proc/${pid}/fd/${fd}`) === file;
      } catch {
        return false;
      }
    });
  } catch {
    return false;
  }
}

/**
 * Whether `pid` reads `scenario`: its environment names it, or (a process may rewrite its command
 * line over its environment) it holds `holding` open, a file only that scenario's calls write.
 */
function usesScenario(pid: number, scenario: string, holding?: string): boolean {
  try {
    if (readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes(`GPUGATE_SIM_SCENARIO=${scenario}`)) return true;
  } catch {
    return false; // gone, or a kernel thread
  }
  return holding !== undefined && holds(pid, holding);
}

/** Pids of the live processes (not zombies) using `scenario` (see usesScenario), this one excluded. */
export function processesUsingScenario(scenario: string, holding?: string): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((pid) => pid !== process.pid && isAlive(pid) && usesScenario(pid, scenario, holding));
}

/** The executable of `pid` (/proc/PID/exe), or null when it cannot be read. */
export function executableOf(pid: number): string | null {
  try {
    return readlinkSync(`/proc/${pid}/exe`);
  } catch {
    return null;
  }
}

/** The NVML helpers (by executable: `helperPath`, default the checkout's) among the processes using `scenario`. */
export function nvmlHelpersUsingScenario(scenario: string, holding?: string, helperPath = nvmlHelperPath()): number[] {
  return processesUsingScenario(scenario, holding).filter((pid) => executableOf(pid) === helperPath);
}

/** What /proc/PID/cmdline shows, its NUL separators read as spaces, trimmed; null when gone. */
export function shownCommandLine(pid: number): string | null {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
  } catch {
    return null;
  }
}

/**
 * SIGKILLs every process still using `scenario` (each one's environment read again just before
 * its signal, so a reused pid is spared) and waits until they are gone. Thaw first: a process
 * stuck in the kernel ends only once its call returns.
 */
export async function killProcessesUsingScenario(scenario: string, holding?: string, timeoutMs = 20_000): Promise<void> {
  const pids = processesUsingScenario(scenario, holding);
  for (const pid of pids) {
    if (!usesScenario(pid, scenario, holding)) continue;
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  await until(`the processes using ${scenario} to end`, () => pids.every((pid) => !isAlive(pid)), timeoutMs);
}
