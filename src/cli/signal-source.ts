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
 *
 * The question itself runs in a session of its own, so a signal to gpugate's process group never
 * reaches it. When the manager's signal comes while it is still running, the manager's way of
 * stopping answers it: a signal to every process of the cgroup (or every descendant) ends the
 * question too, by that very signal, and then CMD got it as well; one to gpugate alone, or to its
 * group, leaves the question to answer.
 */
import { spawn } from 'node:child_process';
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
  /** Why its `signal` already reached CMD, when it signals every process; else null. */
  signalsEveryProcess(signal: NodeJS.Signals): Promise<string | null>;
}

/** What a question to the manager gave: its output, the signal that ended it (not our time limit), or nothing. */
type Answer = { kind: 'output'; text: string } | { kind: 'killed'; signal: NodeJS.Signals } | { kind: 'none' };

/**
 * Why `signal` reached CMD: the manager's configuration `setting` (e.g. KillMode=control-group)
 * says it signals every process, or its question (`asked`) was ended by this very signal.
 */
function everyProcessReason(answer: Answer, signal: NodeJS.Signals, asked: string, signalsAll: (setting: string) => string | null, sentBy: string): string | null {
  if (answer.kind === 'killed') {
    return answer.signal === signal ? `${sentBy} to every process, its \`${asked}\` question (in a session of its own) and CMD included` : null;
  }
  return answer.kind === 'output' ? signalsAll(answer.text) : null;
}

/** systemd stopping the unit whose cgroup is `unitCgroup`: every process of it with KillMode=control-group. */
function systemdManager(unitCgroup: string, unit: string, env: NodeJS.ProcessEnv): Manager {
  const userManager = userManagerPid(env);
  const user = userManager !== null;
  const who = user ? `the user manager (pid ${userManager})` : 'systemd';
  const answer = ask('systemctl', [...(user ? ['--user'] : []), 'show', '--property=KillMode', '--value', unit], env);
  const fromMode = (text: string): string | null =>
    text.trim() === 'control-group' ? `sent by ${who} to every process of ${unit} (KillMode=control-group), CMD included` : null;
  return {
    pid: userManager ?? 1,
    covers: (childCgroup) => inCgroup(childCgroup, unitCgroup),
    signalsEveryProcess: async (signal) => everyProcessReason(await answer, signal, 'systemctl show', fromMode, `sent by ${who}`),
  };
}

/**
 * Slurm's step daemon, gpugate's parent in a task: it signals every process of the step with
 * ProctrackType=proctrack/cgroup (every process of the step's cgroup) or proctrack/linuxproc
 * (every descendant of the task), only the task's process group with proctrack/pgid.
 */
function slurmManager(stepd: number, ownCgroup: string | null, env: NodeJS.ProcessEnv): Manager {
  const answer = ask('scontrol', ['show', 'config'], env);
  const fromProctrack = (text: string): string | null => {
    const proctrack = /^ProctrackType\s*=\s*(\S+)\s*$/m.exec(text)?.[1] ?? null;
    return proctrack === 'proctrack/cgroup' || proctrack === 'proctrack/linuxproc'
      ? `sent by Slurm's step daemon (pid ${stepd}) to every process of the step (ProctrackType=${proctrack}), CMD included`
      : null;
  };
  return {
    pid: stepd,
    covers: (childCgroup) => childCgroup !== null && ownCgroup !== null && inCgroup(childCgroup, ownCgroup),
    signalsEveryProcess: async (signal) => everyProcessReason(await answer, signal, 'scontrol show config', fromProctrack, `sent by Slurm's step daemon (pid ${stepd})`),
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
    return this.manager.signalsEveryProcess(signal);
  }
}

/** $MANAGERPID (set by a user manager for the processes it starts) when it names an ancestor of gpugate above PID 1. */
function userManagerPid(env: NodeJS.ProcessEnv): number | null {
  const text = env['MANAGERPID'];
  if (text === undefined || !/^[1-9][0-9]*$/.test(text)) return null;
  const pid = Number(text);
  return pid > 1 && isAncestor(pid) ? pid : null;
}

/** How long a question to the manager may take; then it is killed and its answer is unknown. */
const ASK_LIMIT_MS = 5000;

/**
 * Runs `command args` in a session of its own (a signal to gpugate's process group must not end
 * it) and resolves to its output, or to the signal that ended it when that was not our time limit.
 */
function ask(command: string, args: readonly string[], env: NodeJS.ProcessEnv): Promise<Answer> {
  return new Promise((resolve) => {
    let child;
    try {
      child = spawn(command, args, { env, detached: true, stdio: ['ignore', 'pipe', 'ignore'] });
    } catch {
      resolve({ kind: 'none' });
      return;
    }
    let text = '';
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, ASK_LIMIT_MS);
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      if (text.length < 1 << 20) text += chunk;
    });
    child.once('error', () => {
      clearTimeout(timer);
      resolve({ kind: 'none' });
    });
    child.once('close', (code: number | null, signal: NodeJS.Signals | null) => {
      clearTimeout(timer);
      if (signal !== null && !timedOut) resolve({ kind: 'killed', signal });
      else resolve(code === 0 ? { kind: 'output', text } : { kind: 'none' });
    });
  });
}
