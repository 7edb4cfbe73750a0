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
 * Slurm's step daemon (gpugate's parent in a task) signals every process of the step with
 * ProctrackType=proctrack/cgroup or linuxproc (asked of `scontrol show config` the same way).
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

/**
 * The manager that started gpugate and may stop it by signalling every process it runs, CMD
 * included: systemd for a unit (PID 1, or the user manager for a user unit), or Slurm's step
 * daemon for a task.
 */
interface Manager {
  /** The sender pid its signals carry. */
  pid: number;
  /** Whether CMD, whose cgroup is `childCgroup`, is among the processes it signals. */
  covers(childCgroup: string | null): boolean;
  /** Why its signal already reached CMD, when its configuration makes it signal every process; else null. */
  signalsEveryProcess: Promise<string | null>;
}

/** systemd stopping the unit whose cgroup is `unitCgroup`: every process of it with KillMode=control-group. */
function systemdManager(unitCgroup: string, unit: string, env: NodeJS.ProcessEnv): Manager {
  const userManager = userManagerPid(env);
  const user = userManager !== null;
  const who = user ? `the user manager (pid ${userManager})` : 'systemd';
  return {
    pid: userManager ?? 1,
    covers: (childCgroup) => inCgroup(childCgroup, unitCgroup),
    signalsEveryProcess: askKillMode(unit, user, env).then((mode) =>
      mode === 'control-group' ? `sent by ${who} to every process of ${unit} (KillMode=control-group), CMD included` : null),
  };
}

/**
 * Slurm's step daemon, gpugate's parent in a task: it signals every process of the step with
 * ProctrackType=proctrack/cgroup (every process of the step's cgroup) or proctrack/linuxproc
 * (every descendant of the task), only the task's process group with proctrack/pgid.
 */
function slurmManager(stepd: number, ownCgroup: string | null, env: NodeJS.ProcessEnv): Manager {
  return {
    pid: stepd,
    covers: (childCgroup) => childCgroup !== null && ownCgroup !== null && inCgroup(childCgroup, ownCgroup),
    signalsEveryProcess: askProctrack(env).then((proctrack) =>
      proctrack === 'proctrack/cgroup' || proctrack === 'proctrack/linuxproc'
        ? `sent by Slurm's step daemon (pid ${stepd}) to every process of the step (ProctrackType=${proctrack}), CMD included`
        : null),
  };
}

/** Slurm's step daemon when it is gpugate's parent in a Slurm task, or null. */
function slurmStepDaemon(env: NodeJS.ProcessEnv): number | null {
  if (env['SLURM_JOB_ID'] === undefined) return null;
  try {
    return readFileSync(`/proc/${process.ppid}/comm`, 'utf8').trim() === 'slurmstepd' ? process.ppid : null;
  } catch {
    return null;
  }
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
    const ownCgroup = procFacts(process.pid)?.cgroup ?? null;
    const stepd = slurmStepDaemon(this.env);
    const unitCgroup = unitCgroupFromPath(ownCgroup);
    const unit = unitOfCgroup(unitCgroup);
    if (stepd !== null) this.manager = slurmManager(stepd, ownCgroup, this.env);
    else if (unitCgroup !== null && unit !== null) this.manager = systemdManager(unitCgroup, unit, this.env);
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
    if (child === null || !this.manager.covers(child.cgroup)) return null;
    return this.manager.signalsEveryProcess;
  }
}

/** $MANAGERPID (set by a user manager for the processes it starts) when it names an ancestor of gpugate above PID 1. */
function userManagerPid(env: NodeJS.ProcessEnv): number | null {
  const text = env['MANAGERPID'];
  if (text === undefined || !/^[1-9][0-9]*$/.test(text)) return null;
  const pid = Number(text);
  return pid > 1 && isAncestor(pid) ? pid : null;
}

/** The output of `command args`, or null when it does not answer. */
function ask(command: string, args: readonly string[], env: NodeJS.ProcessEnv): Promise<string | null> {
  return new Promise((resolve) => {
    execFile(command, args, { encoding: 'utf8', timeout: 5000, env }, (error, stdout) => {
      resolve(error === null ? stdout : null);
    });
  });
}

/** `systemctl [--user] show --property=KillMode --value UNIT`, or null when it does not answer. */
async function askKillMode(unit: string, user: boolean, env: NodeJS.ProcessEnv): Promise<string | null> {
  const answer = await ask('systemctl', [...(user ? ['--user'] : []), 'show', '--property=KillMode', '--value', unit], env);
  return answer === null ? null : answer.trim();
}

/** ProctrackType from `scontrol show config` (e.g. proctrack/cgroup), or null when it does not answer. */
async function askProctrack(env: NodeJS.ProcessEnv): Promise<string | null> {
  const answer = await ask('scontrol', ['show', 'config'], env);
  return answer === null ? null : (/^ProctrackType\s*=\s*(\S+)\s*$/m.exec(answer)?.[1] ?? null);
}
