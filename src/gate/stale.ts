/**
 * Stale GPU-context detection: classifies every process NVML lists on the selected GPUs into one
 * of the holder classes (holder-classes.ts), finds memory no listed process accounts for, hidden
 * holders (/dev/nvidiaN open or mapped but not listed), and leaked /dev/shm segments. All of it is
 * read from procfs under configurable roots; nothing here signals or removes anything.
 */
import { ConfigError } from '../config-error';
import { promises as fsp, type Dirent } from 'node:fs';
import * as path from 'node:path';
import type { GpuDevice, Snapshot } from '../types';
import {
  PF_EXITING,
  environValue,
  parseBootTime,
  listPids,
  readFdTargets,
  readMappedPaths,
  readOtherThreadStates,
  readProcText,
  readProcess,
  scanOpenFiles,
  startTimeMsOf,
  unitOfCgroup,
  type OpenFiles,
  type ProcessInfo,
} from '../host/procfs';
import { pidNamespaceObstacle, procHidepid } from '../host/proc-visibility';
import { ownerOf, PASSWD_PATH, readUserNames, type ProcessOwner, type UserNames } from '../host/process-owner';
import type { ShmEntry } from '../host/shm';
import { DEFAULT_STABLE_TOLERANCE_BYTES, usedExcludingReserved } from './criteria';
import { sharedInspectContext, type ContextSource } from './inspect-context-cache';
import { checkedWhereUsed, checkOptionKeys, type OptionTable } from '../option-keys';

// The classes a holder gets are written once, in holder-classes.ts.
import type { HolderClass } from './holder-classes';
export { HOLDER_CLASSES, type HolderClass } from './holder-classes';

/** One process NVML lists on a selected GPU, classified. */
export interface Holder {
  pid: number;
  class: HolderClass;
  /** NVML indices of the selected GPUs it is listed on. */
  gpus: number[];
  /** GPU memory it holds over those GPUs; null when NVML did not say for one of them. */
  usedBytes: number | null;
  /** What it holds on each of those GPUs, in the order of `gpus` (see usedBytesOn). */
  usedBytesPerGpu: GpuUsage[];
  comm: string | null;
  cmdline: string | null;
  /** /proc state letter (R, S, D, Z…), null when unknown. */
  state: string | null;
  ppid: number | null;
  /** The systemd-relevant cgroup path. */
  cgroup: string | null;
  /** The systemd unit (the last .service/.scope in the cgroup path). */
  unit: string | null;
  /** Process start time in milliseconds since the epoch, null when unknown. */
  startTime: number | null;
  /** Its user, age, whole command line, unit, container and pod; null when its /proc entry could not be read. */
  owner: ProcessOwner | null;
  /** Why it got its class, plus any suspicion (pid reuse, no /dev/nvidia* descriptor). */
  reason: string;
}

/** A process with /dev/nvidiaN open or mapped that NVML does not list on that GPU. */
export interface HiddenHolder {
  pid: number;
  comm: string | null;
  cmdline: string | null;
  /** Null when its /proc entry could not be read. */
  owner: ProcessOwner | null;
  via: Array<'fd' | 'maps'>;
}

/** Per selected GPU: memory no listed process accounts for, and hidden holders. */
export interface GpuHolderSummary {
  index: number;
  /** used (v2) minus the listed processes' memory; null without v2 numbers or with an unknown process amount. */
  unattributedBytes: number | null;
  hiddenHolders: HiddenHolder[];
}

/** The outcome of inspectHolders. */
export interface HolderReport {
  holders: Holder[];
  perGpu: GpuHolderSummary[];
  shm: { leaked: ShmEntry[]; tmpfsFreeBytes: number | null; tmpfsTotalBytes: number | null };
  /** The caller's own unit cgroup used for "leftover" (null: nothing can be a leftover). */
  unitCgroup: string | null;
  /** True when gpugate runs in a nested PID namespace (NVML's pids cannot be looked up). */
  nestedPidNamespace: boolean;
  /**
   * Every other process in the unit cgroup (not the caller or its ancestors), listed by NVML or
   * not, of this activation or an earlier one (only `holders` tells leftovers apart). Empty when
   * there is no unit cgroup.
   */
  unitProcesses: UnitProcess[];
  /** What this call read, and why: the costly scans run only where they can find something. */
  scans: InspectScans;
}

/** When a costly scan runs: always (true), never (false), or only while some selected GPU's memory is unexplained. */
export type ScanWhen = boolean | 'unexplained';

/** What one inspectHolders call read. */
export interface InspectScans {
  /**
   * The selected GPUs whose used memory the listed processes do not explain within
   * UNEXPLAINED_TOLERANCE_BYTES (or cannot be judged: no v2 memory figures, no process list, a
   * process without a memory figure).
   */
  unexplainedGpus: number[];
  /** Whether every process's descriptors and mappings were searched for hidden holders. */
  hiddenHolders: boolean;
  /** Whether /dev/shm was searched for leaked files. */
  shm: boolean;
  /** Whether every process's open files were read (/proc/PID/fd and maps of each process): the costly part. */
  openFiles: boolean;
  /** Where the caller's facts came from: given (options.context), read for this call, or reused from an earlier call. */
  context: ContextSource;
}

/** Memory the listed processes may leave unexplained without a search for holders NVML does not list (the stability tolerance). */
export const UNEXPLAINED_TOLERANCE_BYTES = DEFAULT_STABLE_TOLERANCE_BYTES;

/** A process in the caller's unit cgroup other than the caller and its ancestors. */
export interface UnitProcess {
  pid: number;
  comm: string | null;
  cmdline: string | null;
  state: string | null;
  /** True when NVML lists it on a selected GPU (it is then also in `holders`). */
  listed: boolean;
}

/** Where and how to look. Every root is configurable so tests can use prepared directories. */
export interface InspectOptions {
  /** Default /proc. */
  procRoot?: string;
  /** Default /sys/fs/cgroup: where the unit cgroup's members (cgroup.procs) are read. */
  cgroupRoot?: string;
  /** Default /dev/shm. */
  shmRoot?: string;
  /** Default /dev: where the driver's nodes (nvidiactl) are, when the host has them. */
  devRoot?: string;
  /** NVML indices to inspect; default every device in the snapshot. */
  devices?: number[];
  /** The caller's pid (default process.pid): it and its ancestors are never leftovers. */
  selfPid?: number;
  /**
   * The cgroup whose members may be leftovers. A string names it explicitly; null disables
   * leftovers; undefined detects it from the caller's cgroup (only a systemd .service counts,
   * `.control` and other groups below it included). A member is a leftover only when it is
   * proven to come from an earlier activation than the caller's (see {@link Activation}).
   */
  unitCgroup?: string | null;
  /**
   * Search every process's fds and maps for hidden holders: true always, false never, default
   * 'unexplained': only when some selected GPU's memory is not explained by its listed processes
   * (see InspectScans.unexplainedGpus); the search then covers every selected GPU.
   */
  scanHidden?: ScanWhen;
  /**
   * Search /dev/shm for leaked engine files: true always, false never, default 'unexplained' (as
   * scanHidden). Every process's open files are read only when a file matches a pattern.
   */
  scanShm?: ScanWhen;
  /** /dev/shm name patterns; default DEFAULT_SHM_PATTERNS. An empty list skips the shm scan. */
  shmPatterns?: string[];
  /** Extra pids that act as subreapers (orphans get reparented to them), besides PID 1 and init-like parents. */
  reaperPids?: number[];
  /** Default /etc/passwd: where holders' uids get their user names. */
  passwdPath?: string;
  /**
   * The caller's facts, already read by {@link prepareInspectContext} (a gate builds them once).
   * Without it, the facts read by an earlier call with the same roots are reused while the caller's
   * ancestors, cgroup and passwd file are unchanged (see inspect-context-cache.ts).
   */
  context?: InspectContext;
}

/** inspectHolders's keys (and those of a gate's inspectHolders option); each value is read where it is used. */
export const INSPECT_OPTION_CHECKS: OptionTable<InspectOptions> = {
  procRoot: checkedWhereUsed,
  cgroupRoot: checkedWhereUsed,
  shmRoot: checkedWhereUsed,
  devRoot: checkedWhereUsed,
  devices: checkedWhereUsed,
  selfPid: checkedWhereUsed,
  unitCgroup: checkedWhereUsed,
  scanHidden: checkedWhereUsed,
  scanShm: checkedWhereUsed,
  shmPatterns: checkedWhereUsed,
  reaperPids: checkedWhereUsed,
  passwdPath: checkedWhereUsed,
  context: checkedWhereUsed,
};

const ENGINE_RE = /VLLM::|\bvllm\b|sglang::|\bsglang\b|multiprocessing\.resource_tracker|multiprocessing\.spawn|multiprocessing-fork|ray::|text-generation|tensorrt_llm|trtllm/i;
const REAPER_COMMS = new Set(['systemd', 'init', 'tini', 'dumb-init', 'catatonit', 'docker-init', 's6-svscan', 'runit', 'containerd-shim']);
/** Start times within this slack of the snapshot are not called newer (btime has 1 s resolution). */
const START_TIME_SLACK_MS = 1500;

/** True when a command line looks like an inference engine's worker. */
export function isEngineCommand(text: string | null): boolean {
  return text !== null && ENGINE_RE.test(text);
}

/** The facts about the caller that classification needs; build once, reuse for many polls. */
export interface InspectContext {
  procRoot: string;
  selfPid: number;
  /** The caller and its ancestors. */
  protectedPids: Set<number>;
  unitCgroup: string | null;
  nestedPidNamespace: boolean;
  nestedReason: string;
  /** procfs mounted with hidepid: a missing pid may just be invisible. */
  hidepid: string | null;
  bootTimeMs: number | null;
  reaperPids: Set<number>;
  /**
   * Whether the host has the driver's device nodes (/dev/nvidiactl). Without them (the simulator)
   * no holder can have one open, so a missing descriptor says nothing about pid reuse.
   */
  deviceNodes: boolean;
  /** The activation gpugate runs in: what tells this attempt's processes from an earlier one's. */
  activation: Activation;
  /** User names by uid, from the passwd file (empty when it is unreadable). */
  userNames: UserNames;
}

/**
 * The current activation of the caller's unit. systemd gives every activation (each start and
 * each automatic restart) a new INVOCATION_ID and puts it in the environment of every process it
 * starts for the unit, which their children inherit; /proc/PID/environ keeps the environment a
 * process was started with, unless the process wrote over it (setproctitle does). Where that
 * cannot answer, the start time of the first process of this activation that gpugate can see
 * (its topmost ancestor in the unit cgroup, or an earlier process of the unit showing the same
 * INVOCATION_ID) is the bound: a process of the unit that started before it is a leftover.
 */
export interface Activation {
  /** The caller's INVOCATION_ID, null when it has none (not started by systemd). */
  invocationId: string | null;
  /** Epoch ms when the first process of this activation that gpugate can see started; null when unknown. */
  startedAt: number | null;
}

/**
 * Decides the caller's unit cgroup from its cgroup path: a path ending in a systemd `.service`
 * (not the per-user manager `user@N.service`) is a unit; a login session (`session-N.scope`), the
 * user manager, or the root ('/', as in a container) is not.
 */
export function unitCgroupFromPath(cgroupPath: string | null): string | null {
  if (cgroupPath === null || cgroupPath === '/' || cgroupPath === '') return null;
  const parts = cgroupPath.split('/').filter((p) => p !== '');
  // Under Delegate=yes systemd runs ExecStartPre= etc. in `<unit>/.control` and the service may
  // make its own sub-cgroups: the unit is the last `.service` with only such groups below it.
  let unitAt = parts.length - 1;
  while (unitAt >= 0 && !parts[unitAt]!.endsWith('.service')) {
    if (/\.(slice|scope)$/.test(parts[unitAt]!)) return null;
    unitAt -= 1;
  }
  if (unitAt < 0) return null;
  if (/^user@\d+\.service$/.test(parts[unitAt]!)) return null;
  return `/${parts.slice(0, unitAt + 1).join('/')}`;
}

/** True when a cgroup path is `unit` or below it. */
export function inCgroup(cgroupPath: string | null, unit: string): boolean {
  return cgroupPath !== null && (cgroupPath === unit || cgroupPath.startsWith(`${unit}/`));
}

/** systemd's INVOCATION_ID: 128 bits written as 32 lowercase hex digits. */
const INVOCATION_ID_RE = /^[0-9a-f]{32}$/;

/** What a process's environment tells about its activation: an INVOCATION_ID, or why it tells nothing. */
type EnvironWitness = { kind: 'id'; id: string } | { kind: 'silent'; why: string };

/**
 * The INVOCATION_ID in /proc/PID/environ. The kernel shows the memory the environment was placed
 * in at exec, which the process may overwrite: setproctitle (how vLLM names its workers) writes
 * the title over it, leaving NULs or its remains. An absent, unreadable or malformed value is no
 * evidence either way.
 */
async function readInvocationId(pid: number, procRoot: string): Promise<EnvironWitness> {
  const environ = await readProcText(path.join(procRoot, String(pid), 'environ'));
  if (environ.kind !== 'ok') return { kind: 'silent', why: 'has an unreadable environment' };
  const value = environValue(environ.text, 'INVOCATION_ID');
  if (value === null) return { kind: 'silent', why: 'shows no INVOCATION_ID in its environment (cleared, or written over as setproctitle does)' };
  if (!INVOCATION_ID_RE.test(value)) {
    return { kind: 'silent', why: `shows an INVOCATION_ID that is not one (${JSON.stringify(value.slice(0, 40))}; systemd writes 32 hex digits)` };
  }
  return { kind: 'id', id: value };
}

/**
 * The activation the caller runs in (see {@link Activation}). Its start is bounded by the
 * earliest process gpugate can tie to it: its topmost ancestor in the unit cgroup, or any
 * process of the unit whose environment shows the caller's INVOCATION_ID.
 */
async function readActivation(selfPid: number, ancestors: number[], unitCgroup: string | null, roots: { procRoot: string; cgroupRoot: string }, bootTimeMs: number | null): Promise<Activation> {
  const { procRoot, cgroupRoot } = roots;
  const own = await readInvocationId(selfPid, procRoot);
  const invocationId = own.kind === 'id' ? own.id : null;
  if (unitCgroup === null || bootTimeMs === null) return { invocationId, startedAt: null };
  let startedAt: number | null = null;
  for (const pid of [selfPid, ...ancestors]) {
    if (pid === 1) break;
    const info = await readProcess(pid, procRoot);
    if (info.kind !== 'ok' || !inCgroup(info.cgroup, unitCgroup)) break;
    startedAt = startTimeMsOf(info.stat, bootTimeMs);
  }
  if (invocationId === null) return { invocationId, startedAt };
  for (const pid of await unitCgroupMembers(unitCgroup, procRoot, cgroupRoot)) {
    const witness = await readInvocationId(pid, procRoot);
    if (witness.kind !== 'id' || witness.id !== invocationId) continue;
    const info = await readProcess(pid, procRoot);
    if (info.kind !== 'ok' || !inCgroup(info.cgroup, unitCgroup)) continue;
    const started = startTimeMsOf(info.stat, bootTimeMs);
    if (startedAt === null || started < startedAt) startedAt = started;
  }
  return { invocationId, startedAt };
}

/** The chain of ancestors of pid (its parent, grandparent, … up to PID 1), read under procRoot. */
export async function ancestorsOf(pid: number, procRoot = '/proc'): Promise<number[]> {
  const chain: number[] = [];
  let current = pid;
  for (let depth = 0; depth < 4096; depth += 1) {
    const info = await readProcess(current, procRoot);
    if (info.kind !== 'ok') break;
    const parent = info.stat.ppid;
    if (parent <= 0 || chain.includes(parent) || parent === pid) break;
    chain.push(parent);
    if (parent === 1) break;
    current = parent;
  }
  return chain;
}

/** Reads the caller's facts (namespace, unit cgroup, ancestors, boot time, procfs mount options). */
export async function prepareInspectContext(options: InspectOptions = {}): Promise<InspectContext> {
  const procRoot = options.procRoot ?? '/proc';
  const selfPid = options.selfPid ?? process.pid;
  const deviceNodes = fsp.access(path.join(options.devRoot ?? '/dev', 'nvidiactl')).then(() => true, () => false);
  const userNames = readUserNames(options.passwdPath ?? PASSWD_PATH);
  const [self, procStat, hidepid, pidView, ancestors] = await Promise.all([
    readProcess(selfPid, procRoot),
    readProcText(path.join(procRoot, 'stat')),
    procHidepid(procRoot, selfPid),
    pidNamespaceObstacle(procRoot, selfPid, 'NVML reports host pids, which cannot be looked up here'),
    ancestorsOf(selfPid, procRoot),
  ]);
  let unitCgroup: string | null;
  if (options.unitCgroup !== undefined) unitCgroup = options.unitCgroup;
  else unitCgroup = unitCgroupFromPath(self.kind === 'ok' ? self.cgroup : null);
  const bootSeconds = procStat.kind === 'ok' ? parseBootTime(procStat.text) : null;
  const bootTimeMs = bootSeconds === null ? null : bootSeconds * 1000;
  return {
    procRoot,
    selfPid,
    protectedPids: new Set([selfPid, ...ancestors]),
    unitCgroup,
    nestedPidNamespace: pidView !== null,
    nestedReason: pidView ?? '',
    hidepid,
    bootTimeMs,
    reaperPids: new Set([1, ...(options.reaperPids ?? [])]),
    deviceNodes: await deviceNodes,
    activation: await readActivation(selfPid, ancestors, unitCgroup, { procRoot, cgroupRoot: options.cgroupRoot ?? '/sys/fs/cgroup' }, bootTimeMs),
    userNames: await userNames.then((read) => (read.kind === 'ok' ? read.names : new Map<number, string>())),
  };
}

/** One process's memory on one GPU; null when NVML did not say. */
export interface GpuUsage {
  gpu: number;
  usedBytes: number | null;
}

/** What NVML says about one pid across the selected GPUs. */
export interface ListedProcess {
  pid: number;
  gpus: number[];
  /** The sum over `gpus`; null when NVML did not say for one of them. */
  usedBytes: number | null;
  /** Per GPU, in the order of `gpus`. */
  usedBytesPerGpu: GpuUsage[];
}

function addBytes(a: number | null, b: number | null): number | null {
  return a === null || b === null ? null : a + b;
}

/** Merges the process lists of the selected devices by pid, keeping what it holds on each GPU. */
export function listedProcesses(devices: GpuDevice[]): ListedProcess[] {
  const byPid = new Map<number, ListedProcess>();
  for (const device of devices) {
    for (const proc of device.processes ?? []) {
      const entry = byPid.get(proc.pid) ?? { pid: proc.pid, gpus: [], usedBytes: 0, usedBytesPerGpu: [] };
      const onGpu = entry.usedBytesPerGpu.find((usage) => usage.gpu === device.index);
      if (onGpu === undefined) {
        entry.gpus.push(device.index);
        entry.usedBytesPerGpu.push({ gpu: device.index, usedBytes: proc.usedBytes });
      } else {
        onGpu.usedBytes = addBytes(onGpu.usedBytes, proc.usedBytes);
      }
      entry.usedBytes = addBytes(entry.usedBytes, proc.usedBytes);
      byPid.set(proc.pid, entry);
    }
  }
  return [...byPid.values()].sort((a, b) => a.pid - b.pid);
}

/**
 * What `holder` holds on GPU `gpu` alone (a holder on several GPUs is shown under each with that
 * GPU's share, not its total); null when NVML did not say or it is not listed there.
 */
export function usedBytesOn(holder: Pick<Holder, 'usedBytesPerGpu'>, gpu: number): number | null {
  return holder.usedBytesPerGpu.find((usage) => usage.gpu === gpu)?.usedBytes ?? null;
}

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

/** used (v2, reserved not counted) minus the listed processes' memory, at least 0; null when not computable. */
export function unattributedBytesOf(memory: GpuDevice['memory'], processes: GpuDevice['processes']): number | null {
  if (!memory || memory.source !== 'v2' || !processes) return null;
  let listed = 0;
  for (const proc of processes) {
    if (proc.usedBytes === null) return null;
    listed += proc.usedBytes;
  }
  return Math.max(0, usedExcludingReserved(memory) - listed);
}

/** What a hidden holder is called and who owns it. */
type HiddenName = Pick<HiddenHolder, 'comm' | 'cmdline' | 'owner'>;

function hiddenHoldersOf(device: GpuDevice, openFiles: OpenFiles[], names: Map<number, HiddenName>, ctx: InspectContext): HiddenHolder[] {
  if (device.minorNumber === null) return [];
  const node = `/dev/nvidia${device.minorNumber}`;
  const listed = new Set((device.processes ?? []).map((p) => p.pid));
  const hidden: HiddenHolder[] = [];
  for (const entry of openFiles) {
    if (listed.has(entry.pid) || entry.pid === ctx.selfPid) continue;
    const via: Array<'fd' | 'maps'> = [];
    if (entry.fdTargets?.includes(node)) via.push('fd');
    if (entry.mappedPaths?.some((p) => p === node || p === `${node} (deleted)`)) via.push('maps');
    if (via.length === 0) continue;
    const name = names.get(entry.pid) ?? { comm: null, cmdline: null, owner: null };
    hidden.push({ pid: entry.pid, comm: name.comm, cmdline: name.cmdline, owner: name.owner, via });
  }
  return hidden;
}

async function cgroupProcs(dir: string): Promise<number[] | null> {
  let text: string;
  try {
    text = await fsp.readFile(path.join(dir, 'cgroup.procs'), 'utf8');
  } catch {
    return null;
  }
  const pids = text.split('\n').filter((line) => /^\d+$/.test(line.trim())).map(Number);
  let entries: Dirent[] = [];
  try {
    entries = await fsp.readdir(dir, { withFileTypes: true });
  } catch {
    // No sub-cgroups readable.
  }
  for (const entry of entries) {
    if (!entry.isDirectory()) continue;
    const sub = await cgroupProcs(path.join(dir, entry.name));
    if (sub) pids.push(...sub);
  }
  return pids;
}

/**
 * The pids in `unitCgroup` and below: from cgroup.procs under cgroupRoot (unified, or systemd's
 * v1 tree), else by reading every /proc/PID/cgroup under procRoot.
 */
export async function unitCgroupMembers(unitCgroup: string, procRoot = '/proc', cgroupRoot = '/sys/fs/cgroup'): Promise<number[]> {
  for (const base of [cgroupRoot, path.join(cgroupRoot, 'systemd'), path.join(cgroupRoot, 'unified')]) {
    const pids = await cgroupProcs(path.join(base, unitCgroup));
    if (pids) return [...new Set(pids)].sort((a, b) => a - b);
  }
  const members: number[] = [];
  for (const pid of await listPids(procRoot).catch(() => [] as number[])) {
    const info = await readProcess(pid, procRoot);
    if (info.kind === 'ok' && info.cgroup !== null && (info.cgroup === unitCgroup || info.cgroup.startsWith(`${unitCgroup}/`))) members.push(pid);
  }
  return members;
}

/**
 * Classifies every process NVML lists on the selected GPUs (the snapshot must include process
 * lists), computes per GPU the memory no listed process accounts for and the hidden holders, and
 * lists leaked /dev/shm segments with the tmpfs free space.
 */
export async function inspectHolders(snapshot: Snapshot, options: InspectOptions = {}): Promise<HolderReport> {
  checkOptionKeys<InspectOptions>('inspectHolders(options)', options, INSPECT_OPTION_CHECKS, '{ procRoot, devices }');
  for (const name of ['scanHidden', 'scanShm'] as const) {
    const when: unknown = options[name];
    if (when !== undefined && typeof when !== 'boolean' && when !== 'unexplained') {
      throw new ConfigError(name, `option ${name} must be true, false or 'unexplained', got ${typeof when === 'string' ? JSON.stringify(when) : String(when)}`);
    }
  }
  const shared = options.context !== undefined
    ? { context: options.context, source: 'given' as const }
    : await sharedInspectContext(options, () => prepareInspectContext(options));
  const ctx = shared.context;
  const wanted = options.devices;
  const devices = snapshot.devices.filter((d) => wanted === undefined || wanted.includes(d.index));
  const holders = await Promise.all(listedProcesses(devices).map((listed) => classifyHolder(listed, snapshot.takenAt, ctx)));

  const unexplainedGpus = devices.filter((device) => !memoryExplained(device)).map((device) => device.index);
  const runs = (when: ScanWhen): boolean => (when === 'unexplained' ? unexplainedGpus.length > 0 : when);
  const scanHidden = runs(options.scanHidden ?? 'unexplained');
  // The /dev/shm code loads only for a scan that runs (import(), see gate.ts's staleScan).
  const shmModule = await import('../host/shm.js');
  const patterns = options.shmPatterns ?? [...shmModule.DEFAULT_SHM_PATTERNS];
  const scanShm = patterns.length > 0 && runs(options.scanShm ?? 'unexplained');
  // The shm search reads open files itself, and only when a file matches: read them here only for hidden holders.
  const openFiles = scanHidden ? await scanOpenFiles(ctx.procRoot).catch(() => [] as OpenFiles[]) : [];

  const names = new Map<number, HiddenName>();
  if (scanHidden) {
    const nodes = new Set(devices.filter((d) => d.minorNumber !== null).map((d) => `/dev/nvidia${d.minorNumber}`));
    const interesting = openFiles.filter((e) => [...(e.fdTargets ?? []), ...(e.mappedPaths ?? [])].some((t) => nodes.has(t.replace(/ \(deleted\)$/, ''))));
    await Promise.all(
      interesting.map(async (e) => {
        const info = await readProcess(e.pid, ctx.procRoot);
        names.set(e.pid, info.kind === 'ok'
          ? { comm: info.comm, cmdline: info.cmdline, owner: ownerOf(info, { userNames: ctx.userNames, bootTimeMs: ctx.bootTimeMs, atMs: snapshot.takenAt }) }
          : { comm: null, cmdline: null, owner: null });
      }),
    );
  }
  const perGpu: GpuHolderSummary[] = devices.map((device) => ({
    index: device.index,
    unattributedBytes: unattributedBytesOf(device.memory, device.processes),
    hiddenHolders: scanHidden ? hiddenHoldersOf(device, openFiles, names, ctx) : [],
  }));

  let shm: HolderReport['shm'] = { leaked: [], tmpfsFreeBytes: null, tmpfsTotalBytes: null };
  let openFilesRead = scanHidden;
  if (scanShm) {
    const found = await shmModule.findLeakedShm({ shmRoot: options.shmRoot ?? '/dev/shm', procRoot: ctx.procRoot, patterns, ...(scanHidden ? { openFiles } : {}) });
    shm = { leaked: found.leaked, tmpfsFreeBytes: found.tmpfsFreeBytes, tmpfsTotalBytes: found.tmpfsTotalBytes };
    openFilesRead ||= found.openFilesRead;
  }
  const unitProcesses: UnitProcess[] = [];
  if (ctx.unitCgroup !== null) {
    const listed = new Set(holders.map((h) => h.pid));
    for (const pid of await unitCgroupMembers(ctx.unitCgroup, ctx.procRoot, options.cgroupRoot ?? '/sys/fs/cgroup')) {
      if (ctx.protectedPids.has(pid)) continue;
      const info = await readProcess(pid, ctx.procRoot);
      if (info.kind === 'missing') continue;
      unitProcesses.push({
        pid,
        comm: info.kind === 'ok' ? info.comm : null,
        cmdline: info.kind === 'ok' ? info.cmdline : null,
        state: info.kind === 'ok' ? info.stat.state : null,
        listed: listed.has(pid),
      });
    }
  }
  const scans: InspectScans = { unexplainedGpus, hiddenHolders: scanHidden, shm: scanShm, openFiles: openFilesRead, context: shared.source };
  return { holders, perGpu, shm, unitCgroup: ctx.unitCgroup, nestedPidNamespace: ctx.nestedPidNamespace, unitProcesses, scans };
}

/** Whether the listed processes account for a GPU's used memory within UNEXPLAINED_TOLERANCE_BYTES. */
function memoryExplained(device: GpuDevice): boolean {
  const unattributed = unattributedBytesOf(device.memory, device.processes);
  return unattributed !== null && unattributed <= UNEXPLAINED_TOLERANCE_BYTES;
}
