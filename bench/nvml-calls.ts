/**
 * How many NVML calls a whole `gpugate wait` makes, counted by the simulator
 * (`GPUGATE_SIM_STATS`, docs/scenarios.md) while the real CLI runs as a subprocess on an idle
 * 8-GPU scenario. On a real driver every call costs microseconds to milliseconds and a
 * process-list call takes the driver's global lock, so the count is a figure of its own.
 *
 * - one idle wait: `wait --min-free 0.9 --stable 0s`, which succeeds on its first poll;
 * - one further poll while nothing changes: two waits that cannot succeed (`--stable 1h`, on a copy
 *   of the scenario with 1 GiB in use by no listed process, so they cannot settle early) with
 *   different timeouts; the difference of their counts divided by the difference of their polls
 *   leaves out everything a wait does once (start-up, the stale pre-scan, the final report);
 * - one further poll of busy GPUs whose memory holds still: the same difference of two waits that
 *   time out, on a copy of the scenario with 60 GiB of every GPU held by a listed live process. The
 *   first poll reads the holders; a further one reads memory only.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

/** Per NVML function, how many times the simulator answered it. */
export type CallCounts = Record<string, number>;

/** One wait as measured: its exit status, the polls it reports, and the calls the simulator counted. */
export interface WaitCalls {
  args: string[];
  exitCode: number;
  polls: number;
  total: number;
  calls: CallCounts;
}

/** NVML calls of one further poll, from the difference of two waits that differ only in their polls. */
export interface FurtherPollCalls {
  shorter: WaitCalls;
  longer: WaitCalls;
  /** All calls per poll. */
  total: number;
  /** Per function per poll; functions whose count did not grow with the polls are left out. */
  perFunction: CallCounts;
}

/** What the harness records. */
export interface NvmlCallsReport {
  devices: number;
  idleWait: WaitCalls | null;
  furtherPoll: FurtherPollCalls | null;
  /** One further poll while every GPU is busy and its memory holds still. */
  busyPoll: FurtherPollCalls | null;
  error: string | null;
}

/** The calls recorded in a simulator statistics file (empty when the file is missing). */
export function readSimCalls(statsFile: string): CallCounts {
  if (!fs.existsSync(statsFile)) return {};
  return (JSON.parse(fs.readFileSync(statsFile, 'utf8')) as { calls?: CallCounts }).calls ?? {};
}

function sumCalls(calls: CallCounts): number {
  return Object.values(calls).reduce((total, n) => total + n, 0);
}

/** Run the CLI once with its own statistics file; it must exit with `expectedExit` and print its JSON result. */
function runWait(cli: string, args: string[], env: NodeJS.ProcessEnv, statsFile: string, expectedExit: number): Promise<WaitCalls> {
  fs.rmSync(statsFile, { force: true });
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cli, ...args], { env: { ...env, GPUGATE_SIM_STATS: statsFile }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const command = `gpugate ${args.join(' ')}`;
      if (code !== expectedExit) {
        reject(new Error(`${command} exited ${code ?? signal}, expected ${expectedExit}: ${stderr.trim()}`));
        return;
      }
      let polls: unknown;
      try {
        polls = (JSON.parse(stdout) as { polls?: unknown }).polls;
      } catch {
        reject(new Error(`${command} printed no JSON result: ${JSON.stringify(stdout.slice(0, 200))}`));
        return;
      }
      if (typeof polls !== 'number' || !Number.isInteger(polls) || polls < 1) {
        reject(new Error(`${command} reported polls ${JSON.stringify(polls)}, expected a positive integer`));
        return;
      }
      const calls = readSimCalls(statsFile);
      if (Object.keys(calls).length === 0) {
        reject(new Error(`${command}: the simulator wrote no statistics to ${statsFile}`));
        return;
      }
      resolve({ args, exitCode: code, polls, total: sumCalls(calls), calls });
    });
  });
}

/** The per-poll difference of two waits; throws when they do not differ in their polls. */
export function perPollDifference(shorter: WaitCalls, longer: WaitCalls): FurtherPollCalls {
  const polls = longer.polls - shorter.polls;
  if (polls <= 0) throw new Error(`the longer wait polled ${longer.polls} times, the shorter ${shorter.polls}: no difference to divide`);
  const perFunction: CallCounts = {};
  for (const name of new Set([...Object.keys(shorter.calls), ...Object.keys(longer.calls)])) {
    const grown = (longer.calls[name] ?? 0) - (shorter.calls[name] ?? 0);
    if (grown !== 0) perFunction[name] = grown / polls;
  }
  return { shorter, longer, total: (longer.total - shorter.total) / polls, perFunction };
}

/**
 * Measure both figures with the CLI at `cli` on `scenario` (an idle scenario: every GPU free);
 * `work` holds the statistics files. Failures are reported in `error`, not thrown.
 */
export async function measureWaitCalls(cli: string, scenario: string, devices: number, env: NodeJS.ProcessEnv, work: string): Promise<NvmlCallsReport> {
  const report: NvmlCallsReport = { devices, idleWait: null, furtherPoll: null, busyPoll: null, error: null };
  const waitEnv = { ...env, GPUGATE_SIM_SCENARIO: scenario };
  const stats = (name: string): string => path.join(work, `stats-wait-${name}.json`);
  try {
    report.idleWait = await runWait(cli, ['wait', '--min-free', '0.9', '--stable', '0s', '--json'], waitEnv, stats('idle'), 0);
    // Exit 75: the stability window of an hour is never reached, so every poll finds the same memory.
    // An idle GPU is stable at once (nothing is left to free), so these waits see 1 GiB in use
    // by no listed process (memory that could still come back): the same calls, no early success.
    const unstable = (timeout: string): string[] => ['wait', '--min-free', '0.9', '--stable', '1h', '--interval', '50ms', '--timeout', timeout, '--json'];
    const drainingEnv = { ...env, GPUGATE_SIM_SCENARIO: withUnattributedMemory(scenario, path.join(work, 'scenario-unattributed.json')) };
    const shorter = await runWait(cli, unstable('500ms'), drainingEnv, stats('short'), 75);
    const longer = await runWait(cli, unstable('1500ms'), drainingEnv, stats('long'), 75);
    report.furtherPoll = perPollDifference(shorter, longer);
    // Exit 75: 60 GiB of 96 held by a listed process never leaves 90 % free.
    const busy = (timeout: string): string[] => ['wait', '--min-free', '0.9', '--interval', '50ms', '--timeout', timeout, '--json'];
    const busyEnv = { ...env, GPUGATE_SIM_SCENARIO: withListedHolder(scenario, path.join(work, 'scenario-busy.json')) };
    const busyShorter = await runWait(cli, busy('500ms'), busyEnv, stats('busy-short'), 75);
    const busyLonger = await runWait(cli, busy('1500ms'), busyEnv, stats('busy-long'), 75);
    report.busyPoll = perPollDifference(busyShorter, busyLonger);
  } catch (error) {
    report.error = error instanceof Error ? error.message : String(error);
  }
  return report;
}

/** A copy of the scenario at `source` with 1 GiB in use on every GPU and no process listed; returns its path. */
function withUnattributedMemory(source: string, target: string): string {
  const scenario = JSON.parse(fs.readFileSync(source, 'utf8')) as { devices: Array<{ memory: { usedBytes?: number }; processes?: unknown[] }> };
  for (const device of scenario.devices) {
    device.memory.usedBytes = Math.max(device.memory.usedBytes ?? 0, 1024 ** 3);
    device.processes = [];
  }
  fs.writeFileSync(target, `${JSON.stringify(scenario)}\n`);
  return target;
}

/**
 * A copy of the scenario at `source` with 60 GiB of every GPU held by one listed process, the
 * harness itself (a live process for the wait to inspect); returns its path.
 */
function withListedHolder(source: string, target: string): string {
  const scenario = JSON.parse(fs.readFileSync(source, 'utf8')) as { devices: Array<{ memory: { usedBytes?: number }; processes?: unknown[] }> };
  const heldBytes = 60 * 1024 ** 3;
  for (const device of scenario.devices) {
    device.memory.usedBytes = heldBytes;
    device.processes = [{ pid: process.pid, usedBytes: heldBytes, kinds: ['compute'] }];
  }
  fs.writeFileSync(target, `${JSON.stringify(scenario)}\n`);
  return target;
}

/** The memory reads NVML offers; a further poll that calls nothing else reads memory only. */
export const MEMORY_READS: readonly string[] = ['nvmlDeviceGetMemoryInfo_v2', 'nvmlDeviceGetMemoryInfo'];
