/**
 * The parts of a wait evaluation and a holder report that the command's renderers read,
 * declared structurally: the library's GpuEvaluation / Holder / HolderReport satisfy them,
 * and renderers can be unit-tested with plain objects.
 */

import type { ProcessOwner } from '../host/process-owner';
import type { FieldError, GpuMemory } from '../types';

/** A process holding a GPU, classified by the stale inspection. */
export interface HolderView {
  pid: number;
  class: string;
  gpus?: readonly number[];
  usedBytes: number | null;
  comm: string | null;
  cmdline: string | null;
  state?: string | null;
  ppid?: number | null;
  cgroup?: string | null;
  unit?: string | null;
  /** Its user, age, whole command line and location (null: not read). */
  owner?: ProcessOwner | null;
  reason?: string;
}

/** One GPU judged against the criteria. */
export interface GpuEvaluationView {
  index: number;
  uuid: string;
  pciBusId: string;
  name?: string;
  /** The compute mode, when read (explains a 'compute-mode' reason). */
  computeMode?: string | null;
  memory: GpuMemory | null;
  neededFreeBytes: number | null;
  maxUsedBytes: number | null;
  stableForMs: number;
  /** Nothing left that could still free memory: stable without the full window. */
  settled?: boolean;
  ok: boolean;
  reasons: readonly string[];
  holders: readonly HolderView[];
  unattributedBytes: number | null;
  error: FieldError | null;
}

/** A /dev/shm file no live process references. */
export interface ShmEntryView {
  path: string;
  /** Apparent size. */
  sizeBytes?: number | null;
  /** What it really takes on tmpfs. */
  allocatedBytes?: number | null;
}

/** The stale-resource side of a holder report. */
export interface StaleView {
  holders: readonly HolderView[];
  shm: { leaked: readonly ShmEntryView[]; tmpfsFreeBytes: number | null; tmpfsTotalBytes: number | null } | null;
}

/** Holder classes that mean "left behind by an earlier run" rather than a live or draining holder. */
export const STALE_CLASSES: ReadonlySet<string> = new Set(['leftover', 'orphan', 'zombie', 'zombie_live_threads']);

/** The name to show for a holder: the first word of its command line (engines set it), else comm. */
export function holderName(holder: HolderView): string {
  const first = holder.cmdline?.split(/[\s\0]+/).find((word) => word !== '');
  if (first !== undefined) {
    // A path: keep the file name; a process title like VLLM::Worker_TP6 has no slash.
    const slash = first.lastIndexOf('/');
    return slash === -1 ? first : first.slice(slash + 1) || first;
  }
  return holder.comm ?? '?';
}

/** `pid/name/class`, as progress lines list holders. */
export function holderLabel(holder: HolderView): string {
  return `${holder.pid}/${holderName(holder)}/${holder.class}`;
}

/** A PCI bus id as sysfs and lspci write it: 4-digit domain, lower case (`0000:9b:00.0`). */
export function shortBusId(pciBusId: string): string {
  const match = /^([0-9a-fA-F]+):([0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F])$/.exec(pciBusId);
  if (match === null) return pciBusId.toLowerCase();
  const domain = (match[1] as string).slice(-4).padStart(4, '0');
  return `${domain}:${match[2] as string}`.toLowerCase();
}
