/**
 * Real processes for the stale-detection tests: a live child, a zombie (a parent that does not
 * reap), a reparented orphan with an engine-like name (`exec -a VLLM::Worker_TP6`), and a pid that
 * no longer exists. Every spawned process is tracked; killSpawned() (call it in afterEach) kills
 * them all so no test leaves anything behind.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

const tracked = new Set<number>();
const children = new Set<ChildProcess>();

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The state letter of /proc/PID/stat, or null when the pid does not exist. */
export function procState(pid: number): string | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return text.slice(text.lastIndexOf(')') + 2, text.lastIndexOf(')') + 3);
  } catch {
    return null;
  }
}

/** The state letter of each thread of `pid` (/proc/PID/task/TID/stat); empty when it is gone. */
export function threadStates(pid: number): string[] {
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return [];
  }
  return tids.flatMap((tid) => {
    try {
      const text = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      return [text.slice(text.lastIndexOf(')') + 2, text.lastIndexOf(')') + 3)];
    } catch {
      return []; // the thread ended meanwhile
    }
  });
}

/** Whether `signal` (a number) is pending for the process `pid` (ShdPnd or SigPnd of /proc/PID/status). */
export function signalPending(pid: number, signal: number): boolean {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const bit = 1n << BigInt(signal - 1);
    return ['ShdPnd', 'SigPnd'].some((field) => {
      const hex = new RegExp(`^${field}:\\s*([0-9a-f]+)$`, 'm').exec(status)?.[1];
      return hex !== undefined && (BigInt(`0x${hex}`) & bit) !== 0n;
    });
  } catch {
    return false;
  }
}

/** The parent pid from /proc/PID/stat, or null. */
export function procPpid(pid: number): number | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(text.slice(text.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return null;
  }
}

/** True while the pid exists and is not a zombie. */
export function isAlive(pid: number): boolean {
  const state = procState(pid);
  return state !== null && state !== 'Z' && state !== 'X';
}

/** Resolves once `predicate` holds; throws naming `what` after `timeoutMs`. */
export async function until(what: string, predicate: () => boolean, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

function track(child: ChildProcess): ChildProcess {
  children.add(child);
  if (child.pid !== undefined) tracked.add(child.pid);
  child.on('error', () => {});
  return child;
}

function readLine(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let buffer = '';
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (chunk: string) => {
      buffer += chunk;
      const newline = buffer.indexOf('\n');
      if (newline >= 0) resolve(buffer.slice(0, newline).trim());
    });
    // 'close', not 'exit': a process that prints its line and exits at once (the orphan's launcher)
    // may report its exit before its output has been read.
    child.once('close', () => reject(new Error(`process exited before printing a line (got ${JSON.stringify(buffer)})`)));
  });
}

/**
 * A live child running `sleep`, optionally under another argv[0] (e.g. 'VLLM::Worker_TP0'),
 * holding `options.holding` open on fd 3, with `options.env` as its whole environment.
 */
export async function spawnSleeper(argv0?: string, options: { holding?: string; env?: NodeJS.ProcessEnv } = {}): Promise<number> {
  const open = options.holding === undefined ? '' : `exec 3<'${options.holding}'; `;
  const script = argv0 === undefined ? `${open}exec sleep 120` : `${open}exec -a '${argv0}' sleep 120`;
  const child = track(spawn('bash', ['-c', script], { stdio: 'ignore', ...(options.env !== undefined ? { env: options.env } : {}) }));
  const pid = child.pid!;
  await until(`sleeper ${pid} to exec`, () => {
    try {
      return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'sleep';
    } catch {
      return false;
    }
  });
  return pid;
}

/** A zombie: python3 forks a child that exits at once while the parent sleeps without reaping. */
export async function spawnZombie(): Promise<{ zombiePid: number; parentPid: number }> {
  const code = 'import os, sys, time\npid = os.fork()\nif pid == 0:\n    os._exit(0)\nprint(pid, flush=True)\ntime.sleep(120)\n';
  const parent = track(spawn('python3', ['-c', code], { stdio: ['ignore', 'pipe', 'ignore'] }));
  const zombiePid = Number(await readLine(parent));
  await until(`pid ${zombiePid} to become a zombie`, () => procState(zombiePid) === 'Z');
  return { zombiePid, parentPid: parent.pid! };
}

/**
 * An orphan: bash starts `exec -a NAME sleep` in the background and exits, so the sleeper is
 * reparented to PID 1 or the nearest subreaper. Returns its pid and its new parent.
 */
export async function spawnOrphan(name = 'VLLM::Worker_TP6'): Promise<{ pid: number; reaperPid: number }> {
  const launcher = track(
    spawn('bash', ['-c', `(exec -a '${name}' sleep 120) </dev/null >/dev/null 2>&1 & echo $!`], { stdio: ['ignore', 'pipe', 'ignore'] }),
  );
  const pid = Number(await readLine(launcher));
  tracked.add(pid);
  await until(`orphan ${pid} to be reparented`, () => {
    const ppid = procPpid(pid);
    return ppid !== null && ppid !== launcher.pid && procState(launcher.pid!) === null;
  });
  await until(`orphan ${pid} to exec`, () => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith(name);
    } catch {
      return false;
    }
  });
  return { pid, reaperPid: procPpid(pid)! };
}

/** A pid that does not exist now (a child that has exited and been reaped). */
export async function goneProcessPid(): Promise<number> {
  const child = spawn('true', [], { stdio: 'ignore' });
  const pid = child.pid!;
  await new Promise((resolve) => child.once('exit', resolve));
  await until(`pid ${pid} to disappear`, () => procState(pid) === null);
  return pid;
}

/** Kills every process spawned through this module and waits (briefly) until they are gone. */
export async function killSpawned(): Promise<void> {
  for (const pid of tracked) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  const pids = [...tracked];
  tracked.clear();
  children.clear();
  await until('spawned processes to exit', () => pids.every((pid) => !isAlive(pid)), 5000).catch(() => {});
}

/** Pids spawned and not yet killed (for assertions that nothing leaks). */
export function spawnedPids(): number[] {
  return [...tracked];
}

function mapsContain(pid: number, text: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/maps`, 'utf8').includes(text);
  } catch {
    return false;
  }
}

/**
 * Whether `pid` or one of its children maps a file whose name contains `text`: the driver's
 * library is loaded in the NVML helper process, a child of the command, unless it runs in-process.
 */
export function mapsHereOrInChild(pid: number, text: string): boolean {
  if (mapsContain(pid, text)) return true;
  try {
    const tasks = readdirSync(`/proc/${pid}/task`);
    const children = tasks.flatMap((task) => readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim().split(/\s+/).filter(Boolean));
    return children.some((child) => mapsContain(Number(child), text));
  } catch {
    return false;
  }
}
