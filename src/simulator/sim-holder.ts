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
import { readdirSync, readFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { parseChildren, parseStat, type ProcStat } from '../host/procfs';

/** Titles a holder may carry: what engine process titles look like, nothing a shell would expand. */
const TITLE_RE = /^[\w:.@-]{1,64}$/;

/** How long start() waits for the holder to run under its title, and stop() for it to be gone. */
const SETTLE_MS = 3000;
const POLL_MS = 5;

/** A live, reparented stand-in process. */
export class SimHolder {
  readonly pid: number;
  readonly title: string;
  private readonly startTime: number;
  private readonly lifeline: Socket;

  private constructor(pid: number, title: string, startTime: number, lifeline: Socket) {
    this.pid = pid;
    this.title = title;
    this.startTime = startTime;
    this.lifeline = lifeline;
  }

  /**
   * Start a holder titled `title` that lives until stop() or until this process exits; its
   * executable's symlink is made in `binDir`, a folder of this process's own (it may be removed
   * once the holder runs).
   * @throws Error when the title has unexpected characters, bash is missing, or it did not start
   */
  static start(title: string, binDir: string): SimHolder {
    if (!TITLE_RE.test(title)) throw new Error(`holder title ${JSON.stringify(title)}: expected 1-64 letters, digits or _:.@-`);
    // bash's `exec -a` sets argv[0], the symlink's name sets comm. The holder's standard input is
    // descriptor 3, the far end of the lifeline, which bash then drops. bash waits for its own
    // standard input to close: until then the holder is its child, so the kernel names it (no file
    // passes its pid); then bash exits and the holder is reparented (to PID 1 or the nearest
    // subreaper), as the workers of a killed server are.
    const script = 'ln -sf "$(command -v cat)" "$1/$2" && { exec -a "$2" "$1/$2" <&3 3<&- >/dev/null 2>&1 & } && exec 3<&- && read -r _';
    const bash = spawn('bash', ['-c', script, 'holder', binDir, title], { stdio: ['pipe', 'ignore', 'ignore', 'pipe'] });
    const lifeline = bash.stdio[3] as Socket | null;
    const release = bash.stdin;
    if (bash.pid === undefined || lifeline === null || release === null) {
      lifeline?.destroy();
      release?.destroy();
      throw new Error(`cannot start the holder ${title} with bash`);
    }
    // None may keep this process's event loop alive; a late error only means bash or the holder ended.
    for (const stream of [lifeline, release]) stream.on('error', () => undefined);
    lifeline.unref();
    bash.on('error', () => undefined);
    bash.unref();
    let pid: number | null = null;
    try {
      for (let waited = 0; waited < SETTLE_MS && pid === null; waited += POLL_MS) {
        pid = childrenOf(bash.pid).find((child) => cmdlineIs(child, title)) ?? null;
        if (pid === null) sleepMs(POLL_MS);
      }
    } finally {
      release.destroy();
    }
    const startTime = pid === null ? null : statOf(pid)?.startTimeTicks ?? null;
    if (pid === null || startTime === null) {
      lifeline.destroy();
      throw new Error(`the holder ${title} did not start under its title`);
    }
    // Returned once reparented, so that whoever reads the host sees the orphan it stands for.
    for (let waited = 0; waited < SETTLE_MS && statOf(pid)?.ppid === bash.pid; waited += POLL_MS) sleepMs(POLL_MS);
    return new SimHolder(pid, title, startTime, lifeline);
  }

  /** True while the process exists and is still this holder (same title and start time: no pid reuse). */
  alive(): boolean {
    return cmdlineIs(this.pid, this.title) && statOf(this.pid)?.startTimeTicks === this.startTime;
  }

  /** End the holder: close this process's end of its lifeline, then wait (a few seconds at most) until it is gone. */
  stop(): void {
    this.lifeline.destroy();
    for (let waited = 0; waited < SETTLE_MS && this.alive(); waited += POLL_MS) sleepMs(POLL_MS);
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

/** /proc/PID/stat parsed, or null when the process is gone (or its line unreadable). */
function statOf(pid: number): ProcStat | null {
  try {
    return parseStat(readFileSync(`/proc/${pid}/stat`, 'latin1'));
  } catch {
    return null;
  }
}

/**
 * The pids of `pid`'s children: the kernel's list of them, or, on a kernel without that file
 * (CONFIG_PROC_CHILDREN), every process whose parent `pid` is.
 */
function childrenOf(pid: number): number[] {
  try {
    return parseChildren(readFileSync(`/proc/${pid}/task/${pid}/children`, 'latin1'));
  } catch {
    return readdirSync('/proc').filter((name) => /^\d+$/.test(name)).map(Number).filter((child) => statOf(child)?.ppid === pid);
  }
}

function sleepMs(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}
