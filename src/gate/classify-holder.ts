/**
 * Classifies one process NVML lists into its holder class (holder-classes.ts), from what procfs
 * shows about it and about the caller. Nothing here signals anything.
 */
import {
  PF_EXITING,
  readFdTargets,
  readMappedPaths,
  readOtherThreadStates,
  readProcess,
  startTimeMsOf,
  unitOfCgroup,
  type ProcessInfo,
} from '../host/procfs';
import { ownerOf } from '../host/process-owner';
import { readInvocationId } from './activation';
import { isEngineCommand } from './engine-command';
import type { Holder } from './holder-report';
import type { InspectContext } from './inspect-context';
import type { ListedProcess } from './listed-processes';
import { inCgroup } from './unit-cgroup';

const REAPER_COMMS = new Set(['systemd', 'init', 'tini', 'dumb-init', 'catatonit', 'docker-init', 's6-svscan', 'runit', 'containerd-shim']);
/** Start times within this slack of the snapshot are not called newer (btime has 1 s resolution). */
const START_TIME_SLACK_MS = 1500;

function isNvidiaDevicePath(target: string): boolean {
  return /^\/dev\/nvidia/.test(target);
}

function startTimeMs(info: ProcessInfo, ctx: InspectContext): number | null {
  return ctx.bootTimeMs === null ? null : startTimeMsOf(info.stat, ctx.bootTimeMs);
}

/** Whether a process of the unit cgroup belongs to an earlier activation, and why. */
type Attempt = { earlier: true; why: string } | { earlier: false; why: string; sure: boolean };

/**
 * Tells a process of the unit cgroup from an earlier attempt from one of this activation:
 * INVOCATION_ID first (exact). Where its environment cannot answer (setproctitle wrote over it,
 * it was cleared, it is unreadable) or gpugate has no INVOCATION_ID, its start time against the
 * activation's start: one that started before it is a leftover whatever its environment shows.
 */
async function attemptOf(pid: number, startTime: number | null, ctx: InspectContext): Promise<Attempt> {
  const mine = ctx.activation.invocationId;
  const theirs = await readInvocationId(pid, ctx.procRoot);
  if (mine !== null && theirs.kind === 'id') {
    if (theirs.id === mine) return { earlier: false, sure: true, why: `started by this activation (same INVOCATION_ID ${mine})` };
    return { earlier: true, why: `started by an earlier activation (INVOCATION_ID ${theirs.id}, this one is ${mine})` };
  }
  // With an INVOCATION_ID of its own, gpugate says why the environment did not answer.
  const silent = mine !== null && theirs.kind === 'silent' ? `it ${theirs.why}; ` : '';
  const since = ctx.activation.startedAt;
  if (since === null || startTime === null) {
    return { earlier: false, sure: false, why: `${silent}${mine === null ? 'no INVOCATION_ID and ' : ''}no start times: which activation started it cannot be told` };
  }
  const times = `started at ${new Date(startTime).toISOString()}`;
  const bound = `this activation (${new Date(since).toISOString()})`;
  if (startTime < since) return { earlier: true, why: `${silent}${times}, before ${bound}` };
  // A leftover may still fork after this activation began: only an INVOCATION_ID could tell.
  if (mine !== null) return { earlier: false, sure: false, why: `${silent}${times}, not before ${bound}: which activation started it cannot be told` };
  return { earlier: false, sure: true, why: `${times}, not before ${bound}` };
}

/**
 * Classifies one listed pid. `takenAt` is the snapshot time (epoch ms) used by the pid-reuse
 * guard: a process that started after the snapshot cannot be the one NVML listed.
 */
export async function classifyHolder(listed: ListedProcess, takenAt: number | null, ctx: InspectContext): Promise<Holder> {
  const base: Holder = {
    pid: listed.pid,
    class: 'unverifiable',
    gpus: listed.gpus,
    usedBytes: listed.usedBytes,
    usedBytesPerGpu: listed.usedBytesPerGpu,
    comm: null,
    cmdline: null,
    state: null,
    ppid: null,
    cgroup: null,
    unit: null,
    startTime: null,
    owner: null,
    reason: '',
  };
  if (ctx.nestedPidNamespace) return { ...base, reason: ctx.nestedReason };
  const info = await readProcess(listed.pid, ctx.procRoot);
  if (info.kind === 'missing') {
    if (ctx.hidepid !== null) {
      return { ...base, reason: `no visible process ${listed.pid}, but procfs is mounted with ${ctx.hidepid}: it may belong to another user` };
    }
    return { ...base, class: 'gone', reason: 'no such process: the driver is still tearing its context down; memory should come back' };
  }
  if (info.kind === 'unreadable') return { ...base, reason: info.reason };

  const holder: Holder = {
    ...base,
    comm: info.comm,
    cmdline: info.cmdline,
    state: info.stat.state,
    ppid: info.stat.ppid,
    cgroup: info.cgroup,
    unit: unitOfCgroup(info.cgroup),
    startTime: startTimeMs(info, ctx),
    owner: ownerOf(info, { userNames: ctx.userNames, bootTimeMs: ctx.bootTimeMs, atMs: takenAt ?? Date.now() }),
  };
  const notes: string[] = [];
  if (holder.startTime !== null && takenAt !== null && holder.startTime > takenAt + START_TIME_SLACK_MS) {
    notes.push('suspect: started after the snapshot (pid reuse?)');
  }

  const state = info.stat.state;
  if (state === 'Z' || state === 'X') {
    const threads = await readOtherThreadStates(listed.pid, ctx.procRoot);
    const live = threads.kind === 'ok' ? threads.states.filter((s) => s !== 'Z' && s !== 'X').length : 0;
    if (live > 0) {
      return { ...holder, class: 'zombie_live_threads', reason: join(`leader exited but ${live} thread(s) still run: a live holder`, notes) };
    }
    const parent = await readProcess(info.stat.ppid, ctx.procRoot);
    const parentName = parent.kind === 'ok' ? ` (${parent.comm})` : '';
    return { ...holder, class: 'zombie', reason: join(`exited; parent ${info.stat.ppid}${parentName} has not reaped it`, notes) };
  }
  if (state === 'D' || (info.stat.flags & PF_EXITING) !== 0) {
    const why = state === 'D' ? 'in uninterruptible sleep (state D)' : 'exiting (PF_EXITING set)';
    return { ...holder, class: 'draining', reason: join(`${why}: memory will come back; never signalled`, notes) };
  }

  const fds = await readFdTargets(listed.pid, ctx.procRoot);
  if (fds.kind === 'unreadable') {
    return { ...holder, class: 'unverifiable', reason: join(`${fds.reason}: cannot confirm it holds /dev/nvidia* (another user's process? run as root)`, notes) };
  }
  // maps is large for a CUDA process: read it only when no descriptor already answers.
  let holdsDevice = fds.kind === 'ok' && fds.targets.some(isNvidiaDevicePath);
  if (!holdsDevice) {
    const maps = await readMappedPaths(listed.pid, ctx.procRoot);
    holdsDevice = maps.kind === 'ok' && maps.paths.some(isNvidiaDevicePath);
  }
  const noDescriptor = !holdsDevice && fds.kind === 'ok';
  if (noDescriptor && ctx.deviceNodes) notes.push('suspect: no /dev/nvidia* descriptor (pid reuse?)');

  if (ctx.protectedPids.has(listed.pid)) {
    return { ...holder, class: 'active', reason: join('gpugate itself or one of its ancestors', notes) };
  }
  const reaped = await isReaperParent(info.stat.ppid, ctx);
  const engine = isEngineCommand(info.cmdline) || isEngineCommand(info.comm);
  if (ctx.unitCgroup !== null && inCgroup(info.cgroup, ctx.unitCgroup)) {
    const attempt = await attemptOf(listed.pid, holder.startTime, ctx);
    if (!attempt.earlier) {
      if (!attempt.sure) return { ...holder, class: 'unverifiable', reason: join(`in this service's cgroup ${ctx.unitCgroup}, but ${attempt.why}: never signalled`, notes) };
      return { ...holder, class: 'active', reason: join(`in this service's cgroup ${ctx.unitCgroup}, ${attempt.why}: not a leftover`, notes) };
    }
    // Without the driver's device nodes (the simulator) a missing descriptor is no sign of pid
    // reuse worth reporting, but it still leaves nothing that proves the process holds a GPU.
    if (noDescriptor && !ctx.deviceNodes) notes.push('suspect: no /dev/nvidia* descriptor (this host has no /dev/nvidiactl: nothing proves it holds a GPU)');
    if (notes.length > 0) {
      // Doubt about the pid itself: it may not be the process NVML listed. Never a leftover.
      return { ...holder, class: 'unverifiable', reason: join(`in this service's cgroup ${ctx.unitCgroup} and ${attempt.why}, but its identity is in doubt: never signalled`, notes) };
    }
    const orphanNote = reaped && engine ? ' (an orphaned engine worker)' : '';
    return { ...holder, class: 'leftover', reason: `in this service's own cgroup ${ctx.unitCgroup}${orphanNote}, ${attempt.why}: left over from an earlier attempt` };
  }
  const otherService = unitOfCgroup(info.cgroup)?.endsWith('.service') === true;
  if (reaped && engine && otherService) {
    // systemd starts every service's main process with PPID 1: in another unit's cgroup a
    // reaped parent is how that unit runs, not evidence that its launcher is gone.
    return { ...holder, class: 'foreign', reason: join(`engine process of another service ${unitOfCgroup(info.cgroup)} (cgroup ${info.cgroup}), started by the service manager: never signalled`, notes) };
  }
  if (reaped && engine) {
    return { ...holder, class: 'orphan', reason: join(`engine worker reparented to ${info.stat.ppid}: its launcher is gone`, notes) };
  }
  if (ctx.unitCgroup !== null) {
    return { ...holder, class: 'foreign', reason: join(`live holder in another cgroup ${info.cgroup ?? '(unknown)'}: never signalled`, notes) };
  }
  return { ...holder, class: 'active', reason: join(`live holder (state ${state})`, notes) };
}

function join(reason: string, notes: string[]): string {
  return notes.length === 0 ? reason : `${reason}; ${notes.join('; ')}`;
}

async function isReaperParent(ppid: number, ctx: InspectContext): Promise<boolean> {
  if (ppid <= 1 || ctx.reaperPids.has(ppid)) return true;
  const parent = await readProcess(ppid, ctx.procRoot);
  return parent.kind === 'ok' && REAPER_COMMS.has(parent.comm);
}
