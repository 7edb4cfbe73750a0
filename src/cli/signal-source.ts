/**
 * Who sent a signal to the wrapper, and whether that sender also reached CMD. Node passes no
 * siginfo to process.on listeners, so the addon records si_code and si_pid in front of libuv's
 * handler (native/signal_source.cc).
 *
 * CMD runs in a session of its own (run-wrapped.ts): whatever is addressed to gpugate's process
 * group, session or terminal (`kill -- -PGID`, a shell's job control, Ctrl-C, an init's group kill)
 * reaches gpugate alone, and gpugate forwards it once. What reaches CMD directly is a signal sent
 * to every process of gpugate's cgroup, one by one, by the service manager that stops the unit:
 * systemd with KillMode=control-group (the default) signals each process of the unit's cgroup, CMD
 * included, whatever gpugate's parent is (a script `ExecStart=` without `exec` included). The
 * manager is PID 1, or for a user unit the user manager named by $MANAGERPID (an ancestor of
 * gpugate). Its kill mode is asked of `systemctl show` as soon as CMD starts, not when the signal
 * comes: by then the manager is signalling every process of the cgroup, a new `systemctl` included.
 * Such a signal is not forwarded. Any other sender, or an unknown one, is forwarded.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { constants } from 'node:os';
import { loadBinding } from '../nvml/binding';
import { parseCgroup, parseStat, systemdCgroupPath, unitOfCgroup } from '../host/procfs';
import { inCgroup, unitCgroupFromPath } from '../gate/stale';
import type { Logger } from './logger';

/** si_code of kill(2). */
const SI_USER = 0;

/** A process's parent and cgroup, read synchronously: the decision is made inside a signal listener. */
function procFacts(pid: number): { ppid: number; cgroup: string | null } | null {
  try {
    const stat = parseStat(readFileSync(`/proc/${pid}/stat`, 'utf8'));
    let cgroup: string | null = null;
    try {
      cgroup = systemdCgroupPath(parseCgroup(readFileSync(`/proc/${pid}/cgroup`, 'utf8')));
    } catch {
      // Unknown cgroup: the manager's kill cannot be proven to include it.
    }
    return { ppid: stat.ppid, cgroup };
  } catch {
    return null;
  }
}

/** Whether `ancestor` is a parent, grandparent… of this process. */
function isAncestor(ancestor: number): boolean {
  let pid = process.ppid;
  for (let depth = 0; depth < 64 && pid > 0; depth++) {
    if (pid === ancestor) return true;
    const facts = procFacts(pid);
    if (facts === null) return false;
    pid = facts.ppid;
  }
  return false;
}

/** The service manager that started gpugate's unit, and what it does when it stops the unit. */
interface Manager {
  /** PID 1 for a system unit, the user manager for a user unit. */
  pid: number;
  user: boolean;
  /** The unit's cgroup, e.g. /system.slice/llm.service. */
  unitCgroup: string;
  unit: string;
  /** The unit's KillMode= (null when unknown). */
  killMode: Promise<string | null>;
}

/** Records senders of the forwarded signals and tells whether one already reached CMD. */
export class SignalSources {
  private readonly env: NodeJS.ProcessEnv;
  private watching = false;
  private manager: Manager | null = null;

  constructor(env: NodeJS.ProcessEnv) {
    this.env = env;
  }

  /** Start recording the sender of each of `signals` (each must have a process.on listener). */
  watch(signals: readonly NodeJS.Signals[], logger: Logger): void {
    try {
      const binding = loadBinding();
      for (const signal of signals) binding.watchSignalSource(constants.signals[signal]);
      this.watching = true;
    } catch (error) {
      logger.debug(`signal senders unknown, every signal is forwarded: ${error instanceof Error ? error.message : String(error)}`);
      return;
    }
    const unitCgroup = unitCgroupFromPath(procFacts(process.pid)?.cgroup ?? null);
    const unit = unitOfCgroup(unitCgroup);
    if (unitCgroup === null || unit === null) return;
    const userManager = userManagerPid(this.env);
    const user = userManager !== null;
    this.manager = { pid: userManager ?? 1, user, unitCgroup, unit, killMode: askKillMode(unit, user, this.env) };
  }

  /**
   * Why the latest `signal` already reached the child `childPid` (so forwarding it would deliver
   * it twice), or null when it must be forwarded. The sender is read at once (a later signal
   * would overwrite it); the kill mode may still be on its way.
   */
  async reachedChild(signal: NodeJS.Signals, childPid: number): Promise<string | null> {
    if (!this.watching || this.manager === null) return null;
    const source = loadBinding().lastSignalSource(constants.signals[signal]);
    if (source === null || source.code !== SI_USER || source.pid !== this.manager.pid) return null;
    const child = procFacts(childPid);
    if (child === null || !inCgroup(child.cgroup, this.manager.unitCgroup)) return null;
    if ((await this.manager.killMode) !== 'control-group') return null;
    const manager = this.manager.user ? `the user manager (pid ${this.manager.pid})` : 'systemd';
    return `sent by ${manager} to every process of ${this.manager.unit} (KillMode=control-group), CMD included`;
  }
}

/** $MANAGERPID (set by a user manager for the processes it starts) when it names an ancestor of gpugate above PID 1. */
function userManagerPid(env: NodeJS.ProcessEnv): number | null {
  const text = env['MANAGERPID'];
  if (text === undefined || !/^[1-9][0-9]*$/.test(text)) return null;
  const pid = Number(text);
  return pid > 1 && isAncestor(pid) ? pid : null;
}

/** `systemctl [--user] show --property=KillMode --value UNIT`, or null when it does not answer. */
function askKillMode(unit: string, user: boolean, env: NodeJS.ProcessEnv): Promise<string | null> {
  const args = [...(user ? ['--user'] : []), 'show', '--property=KillMode', '--value', unit];
  return new Promise((resolve) => {
    execFile('systemctl', args, { encoding: 'utf8', timeout: 5000, env }, (error, stdout) => {
      resolve(error === null ? stdout.trim() : null);
    });
  });
}
