/**
 * The shapes of inspectHolders' report: each classified holder, per GPU the memory no listed
 * process explains and the hidden holders, leaked /dev/shm files, the unit's processes, and
 * what the call read.
 */
import type { ProcessOwner } from '../host/process-owner';
import type { ShmEntry } from '../host/shm';
import type { ContextSource } from './inspect-context-cache';
import type { HolderClass } from './holder-classes';

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

/** A process in the caller's unit cgroup other than the caller and its ancestors. */
export interface UnitProcess {
  pid: number;
  comm: string | null;
  cmdline: string | null;
  state: string | null;
  /** True when NVML lists it on a selected GPU (it is then also in `holders`). */
  listed: boolean;
}

/** One process's memory on one GPU; null when NVML did not say. */
export interface GpuUsage {
  gpu: number;
  usedBytes: number | null;
}
