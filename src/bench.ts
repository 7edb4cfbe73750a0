/**
 * `gpugate bench`'s measuring part: this host's poll latency through gpugate, memory only and
 * with process lists (per snapshot and per device: median / p99 / max), and, when `nvidia-smi` is
 * on the PATH, the same number of `nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits`
 * runs for comparison. Safe on a production host: it only reads (snapshots and nvidia-smi
 * queries), changes no GPU setting, and is bounded in time by `durationMs`.
 */
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { jsonDocument } from './cli/json-document';
import { escapeForTerminal } from './cli/terminal-text';
import { openNvml } from './session';
import type { NvmlSession, OpenNvmlOptions, SnapshotOptions } from './types';
import { parseDuration } from './units';
import { UsageError } from './usage-error';

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
  const at = (p: number): number => sorted[Math.min(sorted.length, Math.max(1, Math.ceil(p * sorted.length))) - 1] as number;
  const total = sorted.reduce((sum, v) => sum + v, 0);
  return {
    samples: sorted.length,
    medianUs: at(0.5) / 1000,
    p99Us: at(0.99) / 1000,
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

function formatUs(us: number): string {
  if (us < 1) return `${(us * 1000).toFixed(0)} ns`;
  if (us < 1000) return `${us.toFixed(us < 10 ? 2 : 1)} µs`;
  return `${(us / 1000).toFixed(us < 10_000 ? 2 : 1)} ms`;
}

/** The human-readable table `gpugate bench` prints. */
export function formatBenchResult(result: BenchResult): string {
  const rows: string[][] = [['measure', 'samples', 'median', 'p99', 'max']];
  const add = (label: string, stats: LatencyStats | null): void => {
    if (stats !== null) rows.push([label, String(stats.samples), formatUs(stats.medianUs), formatUs(stats.p99Us), formatUs(stats.maxUs)]);
  };
  add('gpugate snapshot, memory only', result.memoryOnly.perSnapshot);
  add('  per device', result.memoryOnly.perDevice);
  add('gpugate snapshot, with processes', result.withProcesses.perSnapshot);
  add('  per device', result.withProcesses.perDevice);
  if (result.nvidiaSmi !== null) add('nvidia-smi --query-gpu=memory.used', result.nvidiaSmi.perRun);
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? '').length)));
  const lines = [
    escapeForTerminal(`gpugate bench: ${result.deviceCount} GPU(s), library ${result.libraryPath}${result.driverVersion === null ? '' : `, driver ${result.driverVersion}`}`),
    ...rows.map((row) => row.map((cell, column) => (column === 0 ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!))).join('  ')),
  ];
  if (result.nvidiaSmi === null) lines.push('nvidia-smi: not found on PATH (no comparison)');
  else if (result.nvidiaSmi.error !== null) lines.push(escapeForTerminal(`nvidia-smi: ${result.nvidiaSmi.error}`));
  if (result.speedupVsNvidiaSmi !== null) {
    lines.push(`ratio: one memory-only snapshot is ${result.speedupVsNvidiaSmi.toFixed(result.speedupVsNvidiaSmi >= 100 ? 0 : 1)}× faster than one nvidia-smi run (medians)`);
  }
  if (result.stoppedByDuration) lines.push(`note: stopped early at the ${(result.durationMs / 1000).toFixed(1)} s limit; fewer samples than ${result.iterations}`);
  return lines.join('\n') + '\n';
}

/** The flags of `gpugate bench` as the command line gives them (strings as typed). */
export interface BenchCommandValues {
  /** `--iterations N` (default 200). */
  iterations?: string | boolean | string[] | undefined;
  /** `--duration DUR`, e.g. `20s` (default 20s). */
  duration?: string | boolean | string[] | undefined;
  /** `--json`: print one JSON object instead of the table. */
  json?: string | boolean | string[] | undefined;
  /** `--library PATH`. */
  library?: string | boolean | string[] | undefined;
  /** `--nvml-timeout DUR`. */
  'nvml-timeout'?: string | boolean | string[] | undefined;
}

function flagText(values: BenchCommandValues, name: keyof BenchCommandValues): string | undefined {
  const value = values[name];
  return typeof value === 'string' ? value : undefined;
}

/**
 * `gpugate bench` end to end for the command dispatcher: parses its flags (a bad value throws
 * a UsageError naming the flag), measures with {@link runBench}, writes the table (or `--json`)
 * to `out` and resolves to exit code 0. NVML failures propagate as NvmlError for the CLI's
 * usual exit-code mapping.
 */
export async function runBenchCommand(values: BenchCommandValues, out: { write(text: string): unknown }, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const options: BenchOptions = { env };
  const iterationsText = flagText(values, 'iterations');
  if (iterationsText !== undefined) {
    if (!/^[1-9][0-9]*$/.test(iterationsText) || Number(iterationsText) > 10_000_000) {
      throw new UsageError(iterationsText, 'an integer from 1 to 10000000', `--iterations ${JSON.stringify(iterationsText)} is invalid: expected an integer from 1 to 10000000`);
    }
    options.iterations = Number(iterationsText);
  }
  const durationText = flagText(values, 'duration');
  if (durationText !== undefined) {
    try {
      options.durationMs = parseDuration(durationText);
    } catch (error) {
      throw new UsageError(durationText, 'a duration such as 500ms, 20s or 2m', `--duration: ${error instanceof Error ? error.message : String(error)}`);
    }
    if (options.durationMs <= 0 || options.durationMs > 3_600_000) {
      throw new UsageError(durationText, 'a duration above 0 and at most 1h', `--duration ${JSON.stringify(durationText)} is invalid: expected a duration above 0 and at most 1h`);
    }
  }
  const timeoutText = flagText(values, 'nvml-timeout');
  if (timeoutText !== undefined) {
    try {
      options.callTimeoutMs = parseDuration(timeoutText);
    } catch (error) {
      throw new UsageError(timeoutText, 'a duration such as 10s', `--nvml-timeout: ${error instanceof Error ? error.message : String(error)}`);
    }
    if (options.callTimeoutMs <= 0) {
      throw new UsageError(timeoutText, 'a duration above 0', `--nvml-timeout ${JSON.stringify(timeoutText)} is invalid: expected a duration above 0`);
    }
  }
  const library = flagText(values, 'library');
  if (library !== undefined) options.libraryPath = library;
  const result = await runBench(options);
  if (values.json === true) out.write(jsonDocument({ command: 'bench', result: 'ok', exitCode: 0, ...result }));
  else out.write(formatBenchResult(result));
  return 0;
}
