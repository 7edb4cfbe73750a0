/**
 * Who sent a signal to the wrapper, and whether that sender also reached CMD. Node passes no
 * siginfo to process.on listeners, so the addon records si_code and si_pid in front of libuv's
 * handler (native/signal_source.cc). Two senders address CMD along with gpugate:
 * - the kernel for a terminal's keys (SIGINT / SIGQUIT with si_code SI_KERNEL: Ctrl-C, Ctrl-\):
 *   it signals the whole foreground process group, which CMD is in while it shares gpugate's
 *   group (a hang-up's SIGHUP may go to the session leader alone, so it is forwarded);
 * - systemd (si_pid 1, gpugate's own parent) stopping a unit with KillMode=control-group: it
 *   signals every process of the unit's cgroup, CMD included while it is in that cgroup. The
 *   kill mode is asked of `systemctl show` as soon as CMD starts, not when the signal comes:
 *   by then systemd is signalling every process of the cgroup, a new `systemctl` included.
 * For any other sender, or when the source is unknown, gpugate forwards: a signal CMD misses
 * (it would be killed without its graceful stop) is worse than one it gets twice.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { constants } from 'node:os';
import { loadBinding } from '../nvml/binding';
import { parseCgroup, parseStat, systemdCgroupPath, unitOfCgroup } from '../host/procfs';
import { inCgroup, unitCgroupFromPath } from '../gate/stale';
import type { Logger } from './logger';

/** si_code of a signal the kernel sent itself (the terminal's signals among them). */
const SI_KERNEL = 0x80;
/** The signals a terminal sends its foreground process group for a key. */
const TERMINAL_KEYS: ReadonlySet<NodeJS.Signals> = new Set(['SIGINT', 'SIGQUIT']);
/** si_code of kill(2). */
const SI_USER = 0;

/** A process's group and cgroup, read synchronously: the decision is made inside a signal listener. */
function procFacts(pid: number): { pgrp: number; cgroup: string | null } | null {
  try {
    const stat = parseStat(readFileSync(`/proc/${pid}/stat`, 'utf8'));
    let cgroup: string | null = null;
    try {
      cgroup = systemdCgroupPath(parseCgroup(readFileSync(`/proc/${pid}/cgroup`, 'utf8')));
    } catch {
      // Unknown cgroup: the manager's kill cannot be proven to include it.
    }
    return { pgrp: stat.pgrp, cgroup };
  } catch {
    return null;
  }
}

/** Records senders of the forwarded signals and tells whether one already reached CMD. */
export class SignalSources {
  private readonly env: NodeJS.ProcessEnv;
  private watching = false;
  /** The unit's KillMode= (null when unknown); only asked when systemd is gpugate's parent. */
  private killMode: Promise<string | null> = Promise.resolve(null);

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
    const unit = process.ppid === 1 ? unitOfCgroup(unitCgroupFromPath(procFacts(process.pid)?.cgroup ?? null)) : null;
    if (unit !== null) this.killMode = askKillMode(unit, this.env);
  }

  /**
   * Why the latest `signal` already reached the child `childPid` (so forwarding it would deliver
   * it twice), or null when it must be forwarded. The sender is read at once (a later signal
   * would overwrite it); the kill mode may still be on its way.
   */
  async reachedGroup(signal: NodeJS.Signals, childPid: number): Promise<string | null> {
    if (!this.watching) return null;
    const source = loadBinding().lastSignalSource(constants.signals[signal]);
    if (source === null) return null;
    const self = procFacts(process.pid);
    const child = procFacts(childPid);
    if (self === null || child === null) return null;
    if (source.code === SI_KERNEL && TERMINAL_KEYS.has(signal)) {
      if (child.pgrp !== self.pgrp) return null;
      return 'sent by a terminal to its foreground process group, which CMD is in';
    }
    if (source.code === SI_USER && source.pid === 1 && process.ppid === 1) {
      const unit = unitCgroupFromPath(self.cgroup);
      if (unit === null || !inCgroup(child.cgroup, unit)) return null;
      if ((await this.killMode) !== 'control-group') return null;
      return `sent by systemd to every process of ${unitOfCgroup(unit) ?? unit} (KillMode=control-group), CMD included`;
    }
    return null;
  }
}

/** `systemctl show --property=KillMode --value UNIT`, or null when it does not answer. */
function askKillMode(unit: string, env: NodeJS.ProcessEnv): Promise<string | null> {
  return new Promise((resolve) => {
    execFile('systemctl', ['show', '--property=KillMode', '--value', unit], { encoding: 'utf8', timeout: 5000, env }, (error, stdout) => {
      resolve(error === null ? stdout.trim() : null);
    });
  });
}
