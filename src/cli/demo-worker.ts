/**
 * The one real process of `gpugate demo`: a bash that carries vLLM's worker title as its command
 * line (`VLLM::Worker_TP6`) and its name (comm, cut to 15 characters as the kernel does for vLLM's
 * own setproctitle), so it keeps that name when it turns into a zombie, and is double-forked, so
 * its parent is gone and it is reparented, as the workers of a SIGKILLed vLLM server are. It waits
 * with bash's own `read -t` on a pipe it holds both ends of: no child process. It lives at most {@link WORKER_MAX_LIFETIME_S}
 * seconds even if everything else fails, and {@link DemoWorker.stop} ends it for sure.
 */

import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** Upper bound on the worker's life should the demo itself be killed with SIGKILL. */
export const WORKER_MAX_LIFETIME_S = 90;

/** A live, reparented fake engine worker. */
export class DemoWorker {
  readonly pid: number;
  private readonly title: string;

  private constructor(pid: number, title: string) {
    this.pid = pid;
    this.title = title;
  }

  /** Start the worker; throws when bash is missing or the worker did not start. */
  static start(title: string): DemoWorker {
    if (!/^[\w:.-]+$/.test(title)) throw new Error(`demo worker title ${JSON.stringify(title)} has unexpected characters`);
    // bash's `exec -a` sets argv[0], /proc/self/comm the name; the `&` subshell is detached from
    // bash, which exits at once: the worker is then reparented (to PID 1 or the nearest subreaper).
    const body = `printf %s ${title} >/proc/self/comm; exec 3<> <(:); wait $!; read -t ${WORKER_MAX_LIFETIME_S} <&3`;
    const script = `exec -a ${title} bash -c '${body}' </dev/null >/dev/null 2>&1 & echo $!`;
    const result = spawnSync('bash', ['-c', script], { encoding: 'utf8', timeout: 5000 });
    if (result.error !== undefined) throw new Error(`cannot start the demo worker with bash: ${result.error.message}`);
    const pid = Number(result.stdout.trim());
    if (!Number.isInteger(pid) || pid <= 1) throw new Error(`the demo worker did not start (bash printed ${JSON.stringify(result.stdout)})`);
    const worker = new DemoWorker(pid, title);
    // exec may not have happened yet: give it a moment to take its title.
    for (let i = 0; i < 600 && !worker.alive(); i += 1) sleepMs(5);
    if (!worker.alive()) throw new Error(`the demo worker ${pid} did not take its title ${title}`);
    return worker;
  }

  /** True while the process exists and is still our worker (guards against pid reuse). */
  alive(): boolean {
    try {
      const cmdline = readFileSync(`/proc/${this.pid}/cmdline`, 'utf8');
      return cmdline.startsWith(`${this.title}\0`);
    } catch {
      return false;
    }
  }

  /** End the worker (SIGKILL: it only waits, nothing to drain) and wait until it is gone. */
  stop(): void {
    for (let i = 0; i < 200 && this.alive(); i += 1) {
      try {
        process.kill(this.pid, 'SIGKILL');
      } catch {
        return;
      }
      sleepMs(5);
    }
  }
}

/** Pids that no process has now (for the simulated workers whose processes are already gone). */
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

function sleepMs(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}
