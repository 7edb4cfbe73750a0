/**
 * inspectHolders' options, and the facts about the caller that classifying holders needs
 * (ancestors, unit cgroup, activation, procfs options, user names), read once per context.
 */
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { parseBootTime, readProcText, readProcess } from '../host/procfs';
import { ancestorsOf } from '../host/process-ancestors';
import { pidNamespaceObstacle, procHidepid } from '../host/proc-visibility';
import { PASSWD_PATH, readUserNames, type UserNames } from '../host/process-owner';
import { checkedWhereUsed, type OptionTable } from '../option-keys';
import { readActivation, type Activation } from './activation';
import { unitCgroupFromPath } from './unit-cgroup';

/** When a costly scan runs: always (true), never (false), or only while some selected GPU's memory is unexplained. */
export type ScanWhen = boolean | 'unexplained';

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
