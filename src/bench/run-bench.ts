/**
 * The poll-latency measure behind `gpugate bench` (its flags and its table live in the CLI):
 * this host's poll latency through gpugate, memory only and with process lists (per snapshot
 * and per device: median / p99 / max), and, when `nvidia-smi` is on the PATH, the same number of
 * `nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits` runs for comparison. Safe
 * on a production host: it only reads (snapshots and nvidia-smi queries), changes no GPU
 * setting, and is bounded in time by `durationMs`.
 */
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { openNvml } from '../nvml/session';
import type { NvmlSession, OpenNvmlOptions, SnapshotOptions } from '../types';
import { nearestRankPercentile } from '../latency-figures';
import { UsageError } from '../usage-error';
import { checkedWhereUsed, checkOptionKeys, type OptionTable } from '../option-keys';

/** The query `gpugate bench` runs when nvidia-smi is available: the classic ExecStartPre= poll. */
export const NVIDIA_SMI_QUERY_ARGS: readonly string[] = [
  '--query-gpu=memory.used',
  '--format=csv,noheader,nounits',
];

/** Options of {@link runBench}. */
export interface BenchOptions {
  /** Snapshots per measure, and nvidia-smi runs (default 200). */
  iterations?: number;
  /** Upper bound on the whole run in milliseconds (default 20 000); measures stop early when it is reached. */
  durationMs?: number;
  /** An already open session to measure (left open). Otherwise one is opened and closed. */
  session?: NvmlSession;
  /** Passed to `openNvml` when no session is given. */
  libraryPath?: string;
  /** Passed to `openNvml` when no session is given. */
  callTimeoutMs?: number;
  /** nvidia-smi to compare with: a path, or null to skip. Default: `nvidia-smi` found on env.PATH. */
  nvidiaSmiPath?: string | null;
  /** Environment for the PATH lookup and the nvidia-smi runs (default process.env). */
  env?: NodeJS.ProcessEnv;
}

/** runBench's keys; each value is checked where it is used. */
const BENCH_OPTION_CHECKS: OptionTable<BenchOptions> = {
  iterations: checkedWhereUsed,
  durationMs: checkedWhereUsed,
  session: checkedWhereUsed,
  libraryPath: checkedWhereUsed,
  callTimeoutMs: checkedWhereUsed,
  nvidiaSmiPath: checkedWhereUsed,
  env: checkedWhereUsed,
};

/** Summary of one series of timings, in microseconds. */
export interface LatencyStats {
  samples: number;
  medianUs: number;
  p99Us: number;
  maxUs: number;
  meanUs: number;
}

/** One gpugate measure: per snapshot, and per device (per snapshot divided by the device count). */
export interface BenchMeasure {
  perSnapshot: LatencyStats;
  /** null when the host has no device. */
  perDevice: LatencyStats | null;
}

/** The nvidia-smi comparison. */
export type NvidiaSmiMeasure =
  | { path: string; args: readonly string[]; perRun: LatencyStats; error: null }
  | { path: string; args: readonly string[]; perRun: LatencyStats | null; error: string };

/** What {@link runBench} measured. */
export interface BenchResult {
  deviceCount: number;
  libraryPath: string;
  driverVersion: string | null;
  iterations: number;
  durationMs: number;
  /** `session.snapshot()` (the path `gpugate wait` polls with), memory only. */
  memoryOnly: BenchMeasure;
  /** `session.snapshot({ processes: true })`. */
  withProcesses: BenchMeasure;
  /** null when no nvidia-smi was found (or it was disabled). */
  nvidiaSmi: NvidiaSmiMeasure | null;
  /** nvidia-smi median ÷ memory-only snapshot median; null without an nvidia-smi figure. */
  speedupVsNvidiaSmi: number | null;
  /** True when a measure stopped before `iterations` because `durationMs` ran out. */
  stoppedByDuration: boolean;
  elapsedMs: number;
}

function checkPositiveInteger(name: string, value: number, max: number): void {
  if (!Number.isInteger(value) || value < 1 || value > max) {
    throw new UsageError(String(value), `an integer from 1 to ${max}`, `${name} ${String(value)} is invalid: expected an integer from 1 to ${max}`);
  }
}

function checkDuration(value: number): void {
  if (!Number.isFinite(value) || value <= 0 || value > 3_600_000) {
    throw new UsageError(String(value), 'a duration above 0 and at most 1h', `durationMs ${String(value)} is invalid: expected a duration above 0 ms and at most 1 h`);
  }
}

/** Nearest-rank summary of timings given in nanoseconds. */
function summarizeNs(valuesNs: readonly number[]): LatencyStats {
  const sorted = [...valuesNs].sort((a, b) => a - b);
  const total = sorted.reduce((sum, v) => sum + v, 0);
  return {
    samples: sorted.length,
    medianUs: nearestRankPercentile(sorted, 0.5) / 1000,
    p99Us: nearestRankPercentile(sorted, 0.99) / 1000,
    maxUs: (sorted[sorted.length - 1] as number) / 1000,
    meanUs: total / sorted.length / 1000,
  };
}

/** The executable named `name` on a PATH string, or null. */
export function findOnPath(name: string, pathVariable: string | undefined): string | null {
  for (const dir of (pathVariable ?? '').split(path.delimiter)) {
    if (dir === '') continue;
    const candidate = path.join(dir, name);
    try {
      if (fs.statSync(candidate).isFile()) {
        fs.accessSync(candidate, fs.constants.X_OK);
        return candidate;
      }
    } catch {
      // not here
    }
  }
  return null;
}

async function measureSnapshots(
  session: NvmlSession,
  options: SnapshotOptions,
  iterations: number,
  deadline: number,
): Promise<{ measure: BenchMeasure; deviceCount: number; stopped: boolean }> {
  const warm = await session.snapshot(options);
  const deviceCount = warm.devices.length;
  for (let i = 0; i < Math.min(10, iterations) && performance.now() < deadline; i++) await session.snapshot(options);
  const values: number[] = [];
  let stopped = false;
  for (let i = 0; i < iterations; i++) {
    if (i > 0 && performance.now() >= deadline) {
      stopped = true;
      break;
    }
    const start = process.hrtime.bigint();
    await session.snapshot(options);
    values.push(Number(process.hrtime.bigint() - start));
  }
  const perSnapshot = summarizeNs(values);
  const perDevice = deviceCount === 0 ? null : summarizeNs(values.map((v) => v / deviceCount));
  return { measure: { perSnapshot, perDevice }, deviceCount, stopped };
}

function runOnce(file: string, env: NodeJS.ProcessEnv, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(file, NVIDIA_SMI_QUERY_ARGS, { env, timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 1 << 20 }, (error, _stdout, stderr) => {
      if (error === null) resolve();
      else reject(new Error(`${file} ${NVIDIA_SMI_QUERY_ARGS.join(' ')} failed: ${String(stderr).trim() || error.message}`));
    });
  });
}

async function measureNvidiaSmi(
  file: string,
  env: NodeJS.ProcessEnv,
  iterations: number,
  deadline: number,
): Promise<{ measure: NvidiaSmiMeasure; stopped: boolean }> {
  const values: number[] = [];
  let stopped = false;
  try {
    for (let i = 0; i < iterations; i++) {
      const remainingMs = deadline - performance.now();
      if (i > 0 && remainingMs <= 0) {
        stopped = true;
        break;
      }
      // The first run may exceed the budget a little (it is the only one); later ones must fit.
      const timeoutMs = Math.max(1, Math.min(10_000, i === 0 ? Math.max(remainingMs, 2_000) : remainingMs));
      const start = process.hrtime.bigint();
      await runOnce(file, env, timeoutMs);
      values.push(Number(process.hrtime.bigint() - start));
    }
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return { measure: { path: file, args: NVIDIA_SMI_QUERY_ARGS, perRun: values.length > 0 ? summarizeNs(values) : null, error: message }, stopped };
  }
  return { measure: { path: file, args: NVIDIA_SMI_QUERY_ARGS, perRun: summarizeNs(values), error: null }, stopped };
}

/**
 * Measure this host's poll latency through gpugate and, when nvidia-smi is available, the same
 * number of nvidia-smi queries. Read-only and bounded by `durationMs`.
 */
export async function runBench(options: BenchOptions = {}): Promise<BenchResult> {
  checkOptionKeys<BenchOptions>('runBench(options)', options, BENCH_OPTION_CHECKS, '{ iterations, durationMs }');
  const iterations = options.iterations ?? 200;
  const durationMs = options.durationMs ?? 20_000;
  checkPositiveInteger('iterations', iterations, 10_000_000);
  checkDuration(durationMs);
  const env = options.env ?? process.env;
  const nvidiaSmiPath = options.nvidiaSmiPath === undefined ? findOnPath('nvidia-smi', env['PATH']) : options.nvidiaSmiPath;

  const started = performance.now();
  const share = nvidiaSmiPath === null ? [0.5, 1] : [0.2, 0.4];
  let session = options.session;
  const ownSession = session === undefined;
  if (session === undefined) {
    const openOptions: OpenNvmlOptions = {};
    if (options.libraryPath !== undefined) openOptions.libraryPath = options.libraryPath;
    if (options.callTimeoutMs !== undefined) openOptions.callTimeoutMs = options.callTimeoutMs;
    session = await openNvml(openOptions);
  }
  try {
    const memory = await measureSnapshots(session, { memoryOnly: true }, iterations, started + durationMs * (share[0] as number));
    const processes = await measureSnapshots(session, { processes: true }, iterations, started + durationMs * (share[1] as number));
    let nvidiaSmi: NvidiaSmiMeasure | null = null;
    let smiStopped = false;
    if (nvidiaSmiPath !== null) {
      const smi = await measureNvidiaSmi(nvidiaSmiPath, env, iterations, started + durationMs);
      nvidiaSmi = smi.measure;
      smiStopped = smi.stopped;
    }
    const smiMedian = nvidiaSmi?.perRun?.medianUs;
    return {
      deviceCount: memory.deviceCount,
      libraryPath: session.library.path,
      driverVersion: session.library.driverVersion,
      iterations,
      durationMs,
      memoryOnly: memory.measure,
      withProcesses: processes.measure,
      nvidiaSmi,
      speedupVsNvidiaSmi: smiMedian === undefined ? null : smiMedian / memory.measure.perSnapshot.medianUs,
      stoppedByDuration: memory.stopped || processes.stopped || smiStopped,
      elapsedMs: performance.now() - started,
    };
  } finally {
    if (ownSession) await session.close();
  }
}
