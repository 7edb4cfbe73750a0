/**
 * Runs the BUILT command (dist/cli/main.js, compiled by test/global-setup.ts) as a subprocess,
 * with an environment cleaned of anything that would change its behaviour (GPU selection
 * variables, JOURNAL_STREAM, NOTIFY_SOCKET), pointed at the simulator library.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync, statSync } from 'node:fs';
import * as path from 'node:path';
import { repoRoot, simLibraryPath } from './sim';

/** dist/cli/main.js. */
export function cliPath(): string {
  return path.join(repoRoot(), 'dist', 'cli', 'main.js');
}

const SCRUBBED = ['NVIDIA_VISIBLE_DEVICES', 'CUDA_VISIBLE_DEVICES', 'SLURM_JOB_GPUS', 'CUDA_DEVICE_ORDER', 'JOURNAL_STREAM', 'NOTIFY_SOCKET', 'GPUGATE_SIM_SCENARIO', 'GPUGATE_NVML_LIBRARY', 'INVOCATION_ID'];

/** Environment for the CLI reading `scenarioPath` through the simulator (or no scenario). */
export function cliEnv(scenarioPath: string | null, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of SCRUBBED) delete env[name];
  env.GPUGATE_NVML_LIBRARY = simLibraryPath();
  if (scenarioPath !== null) env.GPUGATE_SIM_SCENARIO = scenarioPath;
  return { ...env, ...extra };
}

/** How a run ended. */
export interface CliRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** Wall-clock milliseconds from spawn to exit. */
  elapsedMs: number;
}

/** A running CLI whose output can be awaited line by line. */
export interface CliProcess {
  child: ChildProcess;
  /** Output so far. */
  stdout(): string;
  stderr(): string;
  /** Resolve once `pattern` appears on stderr (or stdout with `stream: 'stdout'`); reject after `timeoutMs`. */
  waitFor(pattern: RegExp, stream?: 'stdout' | 'stderr', timeoutMs?: number): Promise<void>;
  /** Resolve when the process exits. */
  done: Promise<CliRun>;
}

/** Options of startCli / runCli. */
export interface CliOptions {
  env?: NodeJS.ProcessEnv;
  /** Write stderr to this file instead of a pipe (for journald stream tests). */
  stderrFile?: string;
  /** Kill the process (SIGKILL) after this long; the run then has signal 'SIGKILL'. Default 30 s. */
  killAfterMs?: number;
  /** How the command is started: the program and its first arguments. Default `node dist/cli/main.js`; `[cliPath()]` runs it through its shebang. */
  launch?: readonly string[];
  /** Give the command a stdin pipe (`child.stdin`) instead of none. */
  stdinPipe?: boolean;
}

/** Start `node dist/cli/main.js ARGS` (or `options.launch` ARGS). */
export function startCli(args: readonly string[], options: CliOptions = {}): CliProcess {
  const started = performance.now();
  let stderrFd: number | null = null;
  if (options.stderrFile !== undefined) stderrFd = openSync(options.stderrFile, 'w');
  const [program, ...leading] = options.launch ?? [process.execPath, cliPath()];
  const child = spawn(program!, [...leading, ...args], {
    env: options.env ?? cliEnv(null),
    stdio: [options.stdinPipe === true ? 'pipe' : 'ignore', 'pipe', stderrFd ?? 'pipe'],
  });
  if (stderrFd !== null) closeSync(stderrFd);
  let out = '';
  let err = '';
  const listeners = new Set<() => void>();
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk;
    for (const listener of listeners) listener();
  });
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    err += chunk;
    for (const listener of listeners) listener();
  });
  const killer = setTimeout(() => child.kill('SIGKILL'), options.killAfterMs ?? 30_000);
  const done = new Promise<CliRun>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code, signal) => {
      clearTimeout(killer);
      const stderr = options.stderrFile !== undefined ? readFileSync(options.stderrFile, 'utf8') : err;
      resolve({ code, signal, stdout: out, stderr, elapsedMs: performance.now() - started });
    });
  });
  const readErr = (): string => (options.stderrFile !== undefined ? safeRead(options.stderrFile) : err);
  return {
    child,
    stdout: () => out,
    stderr: readErr,
    done,
    waitFor(pattern, stream = 'stderr', timeoutMs = 15_000) {
      return new Promise<void>((resolve, reject) => {
        const check = (): boolean => pattern.test(stream === 'stdout' ? out : readErr());
        if (check()) {
          resolve();
          return;
        }
        const poll = setInterval(() => listener(), 50);
        const timer = setTimeout(() => {
          clearInterval(poll);
          listeners.delete(listener);
          reject(new Error(`timed out waiting for ${String(pattern)} on ${stream}; stderr so far:\n${readErr()}\nstdout so far:\n${out}`));
        }, timeoutMs);
        const listener = (): void => {
          if (!check()) return;
          clearInterval(poll);
          clearTimeout(timer);
          listeners.delete(listener);
          resolve();
        };
        listeners.add(listener);
        void done.then(() => listener());
      });
    },
  };
}

function safeRead(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

/** Run the CLI to completion. */
export function runCli(args: readonly string[], options: CliOptions = {}): Promise<CliRun> {
  return startCli(args, options).done;
}

/** `dev:ino` of a file, as systemd writes JOURNAL_STREAM. */
export function journalStreamOf(file: string): string {
  const stat = statSync(file, { bigint: true });
  return `${stat.dev}:${stat.ino}`;
}

/** Parse the single JSON object the CLI prints on stdout with --json. */
export function parseJsonOutput(run: CliRun): Record<string, unknown> {
  const lines = run.stdout.trim().split('\n');
  if (lines.length !== 1) throw new Error(`expected one JSON line on stdout, got ${lines.length}:\n${run.stdout}\nstderr:\n${run.stderr}`);
  return JSON.parse(lines[0] as string) as Record<string, unknown>;
}
