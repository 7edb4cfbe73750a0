/**
 * What an init must do, for gpugate as PID 1 (the wrapper form as a container's entry point):
 * every orphan in the container is re-parented to it, and an exited orphan stays a zombie (its
 * pid and process-table entry taken) until its parent reaps it. On every SIGCHLD, and once a
 * second in case a SIGCHLD was merged with another, the zombies whose parent is this process
 * are reaped one by one, by pid, except the children gpugate spawned itself: Node (libuv) reaps
 * those and reports their status.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { loadBinding } from '../nvml/binding';
import { parseStat } from '../host/procfs';
import { logEvent } from './logfmt';
import type { Logger } from './logger';

const SWEEP_INTERVAL_MS = 1000;

/** The zombies whose parent is `parentPid`, read from /proc. */
function zombieChildren(parentPid: number): number[] {
  const zombies: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = parseStat(readFileSync(`/proc/${name}/stat`, 'utf8'));
      if (stat.ppid === parentPid && stat.state === 'Z') zombies.push(stat.pid);
    } catch {
      // Gone between readdir and read, or not readable: nothing to reap there.
    }
  }
  return zombies;
}

/** Starts reaping orphans; `ownChildren` are never touched. Returns a stop function. */
export function startOrphanReaper(ownChildren: () => ReadonlySet<number>, logger: Logger): () => void {
  const binding = loadBinding();
  const sweep = (): void => {
    const own = ownChildren();
    for (const pid of zombieChildren(process.pid)) {
      if (own.has(pid)) continue;
      if (binding.reapChild(pid)) logger.debug(logEvent('reaped', [['orphan', pid]]));
    }
  };
  process.on('SIGCHLD', sweep);
  const timer = setInterval(sweep, SWEEP_INTERVAL_MS);
  timer.unref();
  return () => {
    process.removeListener('SIGCHLD', sweep);
    clearInterval(timer);
  };
}
