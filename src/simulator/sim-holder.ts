/**
 * A real process standing in for a simulated GPU holder, so tools that join NVML's pids with the
 * host's process table (nvitop, gpustat, `gpugate holders`) see a live process with the expected
 * name: argv[0] and comm carry the title (e.g. `VLLM::Worker_TP0`; comm is the name of the file
 * executed, so it runs `tail` through a symlink of that name), it is double-forked and so
 * reparented, as the workers of a killed server are, and it ends by itself when the process that
 * started it is gone (`tail --pid`), so it cannot outlive its simulated host by more than a second.
 */

import { spawnSync } from 'node:child_process';
import { closeSync, readFileSync } from 'node:fs';
import { constants } from 'node:os';
import { loadBinding } from '../nvml/binding';

/** Titles a holder may carry: what engine process titles look like, nothing a shell would expand. */
const TITLE_RE = /^[\w:.@-]{1,64}$/;

/** A live, reparented stand-in process. */
export class SimHolder {
  readonly pid: number;
  readonly title: string;
  private readonly startTime: string;

  private constructor(pid: number, title: string, startTime: string) {
    this.pid = pid;
    this.title = title;
    this.startTime = startTime;
  }

  /**
   * Start a holder titled `title` that lives while process `ownerPid` (default: this one) does;
   * its executable's symlink is made in `binDir` (which may be removed once it runs).
   * @throws Error when the title has unexpected characters, bash is missing, or it did not start
   */
  static start(title: string, binDir: string, ownerPid: number = process.pid): SimHolder {
    if (!TITLE_RE.test(title)) throw new Error(`holder title ${JSON.stringify(title)}: expected 1-64 letters, digits or _:.@-`);
    // bash's `exec -a` sets argv[0], the symlink's name sets comm; the `&` job is detached from
    // bash, which exits at once, so the holder is reparented (to PID 1 or the nearest subreaper).
    const script = 'ln -sf "$(command -v tail)" "$1/$2" && { exec -a "$2" "$1/$2" -s 1 --pid="$3" -f /dev/null </dev/null >/dev/null 2>&1 & echo $!; }';
    const result = spawnSync('bash', ['-c', script, 'holder', binDir, title, String(ownerPid)], { encoding: 'utf8', timeout: 5000 });
    if (result.error !== undefined) throw new Error(`cannot start the holder ${title} with bash: ${result.error.message}`);
    const pid = Number(result.stdout.trim());
    if (!Number.isInteger(pid) || pid <= 1) throw new Error(`the holder ${title} did not start (bash printed ${JSON.stringify(result.stdout)})`);
    // exec may not have happened yet: give it a moment to take its title.
    for (let i = 0; i < 600 && !cmdlineIs(pid, title); i += 1) sleepMs(5);
    const startTime = startTimeOf(pid);
    if (!cmdlineIs(pid, title) || startTime === null) throw new Error(`the holder ${pid} did not take its title ${title}`);
    return new SimHolder(pid, title, startTime);
  }

  /** True while the process exists and is still this holder (same title and start time: no pid reuse). */
  alive(): boolean {
    return cmdlineIs(this.pid, this.title) && startTimeOf(this.pid) === this.startTime;
  }

  /**
   * End the holder (SIGKILL: it holds nothing) after proving it is still ours; waits until it is
   * gone. It is held by a pidfd opened before the proof (a pid reused before the open fails the
   * proof; one reused after it is not what the pidfd names), so the signal reaches this holder or
   * no process; where pidfds are missing, the proof is re-read before each signal, as the reaper
   * does (src/gate/reap.ts).
   */
  stop(): void {
    const held = holdByPidfd(this.pid);
    if (held === 'gone') return;
    try {
      for (let i = 0; i < 200 && this.alive(); i += 1) {
        try {
          if (held === null) process.kill(this.pid, 'SIGKILL');
          else held.kill();
        } catch {
          return;
        }
        sleepMs(5);
      }
    } finally {
      if (held !== null) held.close();
    }
  }
}

/** A pidfd on `pid` with its SIGKILL; 'gone' when no process has the pid; null without pidfds (old kernel, no addon). */
function holdByPidfd(pid: number): { kill(): void; close(): void } | 'gone' | null {
  let binding;
  try {
    binding = loadBinding();
  } catch {
    return null;
  }
  let fd: number;
  try {
    fd = binding.pidfdOpen(pid);
  } catch (error) {
    return (error as { errno?: unknown }).errno === constants.errno.ESRCH ? 'gone' : null;
  }
  return {
    kill: () => binding.pidfdSendSignal(fd, constants.signals.SIGKILL),
    close: () => closeSync(fd),
  };
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
