/**
 * A real process standing in for a simulated GPU holder, so tools that join NVML's pids with the
 * host's process table (nvitop, gpustat, `gpugate holders`) see a live process with the expected
 * name: argv[0] and comm carry the title (e.g. `VLLM::Worker_TP0`; comm is the name of the file
 * executed, so it runs `cat` through a symlink of that name), and it is double-forked and so
 * reparented, as the workers of a killed server are.
 *
 * It is never signalled. The holder is `cat` reading a socket whose other end only this process
 * holds (its lifeline): it ends at end of file, when stop() closes that end or this process exits,
 * whichever comes first. A reparented process's pid can be reused once it is gone; with no signal
 * to send, no pid is ever acted on, so no process that took a holder's pid can be hit.
 */

import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { join } from 'node:path';

/** Titles a holder may carry: what engine process titles look like, nothing a shell would expand. */
const TITLE_RE = /^[\w:.@-]{1,64}$/;

/** How long start() waits for the holder to run under its title, and stop() for it to be gone. */
const SETTLE_MS = 3000;
const POLL_MS = 5;

/** How many holders this process has started (it names their pid files). */
let startedHolders = 0;

/** A live, reparented stand-in process. */
export class SimHolder {
  readonly pid: number;
  readonly title: string;
  private readonly startTime: string;
  private readonly lifeline: Socket;

  private constructor(pid: number, title: string, startTime: string, lifeline: Socket) {
    this.pid = pid;
    this.title = title;
    this.startTime = startTime;
    this.lifeline = lifeline;
  }

  /**
   * Start a holder titled `title` that lives until stop() or until this process exits; its
   * executable's symlink (and the file its pid is passed through) is made in `binDir`, a folder of
   * this process's own (it may be removed once the holder runs).
   * @throws Error when the title has unexpected characters, bash is missing, or it did not start
   */
  static start(title: string, binDir: string): SimHolder {
    if (!TITLE_RE.test(title)) throw new Error(`holder title ${JSON.stringify(title)}: expected 1-64 letters, digits or _:.@-`);
    // bash's `exec -a` sets argv[0], the symlink's name sets comm; the `&` job is detached from
    // bash, which exits at once, so the holder is reparented (to PID 1 or the nearest subreaper).
    // Its standard input is descriptor 3, the far end of the lifeline, which bash then drops.
    // Several holders may share a title (and so the symlink): each has a pid file of its own.
    startedHolders += 1;
    const pidFile = join(binDir, `${title}.${startedHolders}.pid`);
    const script = 'ln -sf "$(command -v cat)" "$1/$2" && { exec -a "$2" "$1/$2" <&3 3<&- >/dev/null 2>&1 & echo $! > "$3"; }';
    const child = spawn('bash', ['-c', script, 'holder', binDir, title, pidFile], { stdio: ['ignore', 'ignore', 'ignore', 'pipe'] });
    const lifeline = child.stdio[3] as Socket | null;
    if (child.pid === undefined || lifeline === null) {
      lifeline?.destroy();
      throw new Error(`cannot start the holder ${title} with bash`);
    }
    // Neither may keep this process's event loop alive; a late error only means the holder ended.
    lifeline.on('error', () => undefined);
    lifeline.unref();
    child.on('error', () => undefined);
    child.unref();
    let pid = Number.NaN;
    for (let waited = 0; waited < SETTLE_MS; waited += POLL_MS) {
      pid = readPid(pidFile);
      if (Number.isInteger(pid) && pid > 1 && cmdlineIs(pid, title)) break;
      sleepMs(POLL_MS);
    }
    const startTime = Number.isInteger(pid) && pid > 1 ? startTimeOf(pid) : null;
    if (!cmdlineIs(pid, title) || startTime === null) {
      lifeline.destroy();
      throw new Error(`the holder ${title} did not start under its title (pid ${Number.isNaN(pid) ? 'unknown' : pid})`);
    }
    return new SimHolder(pid, title, startTime, lifeline);
  }

  /** True while the process exists and is still this holder (same title and start time: no pid reuse). */
  alive(): boolean {
    return cmdlineIs(this.pid, this.title) && startTimeOf(this.pid) === this.startTime;
  }

  /** End the holder: close this process's end of its lifeline, then wait (a few seconds at most) until it is gone. */
  stop(): void {
    this.lifeline.destroy();
    for (let waited = 0; waited < SETTLE_MS && this.alive(); waited += POLL_MS) sleepMs(POLL_MS);
  }
}

function readPid(file: string): number {
  try {
    const text = readFileSync(file, 'utf8');
    return /^\d+\n$/.test(text) ? Number(text) : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

/** Pids that no process has now (for simulated processes that are already gone). */
export function unusedPids(count: number): number[] {
  let max = 32768;
  try {
    max = Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8').trim()) || max;
  } catch {
    // keep the classic default
  }
  const pids: number[] = [];
  for (let pid = max - 1; pid > 300 && pids.length < count; pid -= 7) {
    try {
      readFileSync(`/proc/${pid}/stat`);
    } catch {
      pids.push(pid);
    }
  }
  return pids;
}

function cmdlineIs(pid: number, title: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith(`${title}\0`);
  } catch {
    return false;
  }
}

/** Field 22 of /proc/PID/stat (start time in clock ticks), or null. */
function startTimeOf(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

function sleepMs(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}
