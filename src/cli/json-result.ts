/**
 * The `--json` document of `wait` and `check`: one object on stdout at the end, with the result,
 * the exit code, the elapsed time and per GPU the numbers, the holders with their class, and the
 * stale resources found. Field names carry their units (usedBytes, elapsedMs).
 */
import type { EngineView } from '../gate/engine-view';

import type { ProcessOwner } from '../host/process-owner';
import { holderName } from '../gate/failure-text';
import { isStaleHolder } from '../gate/stale-holders';
import { usedBytesOn, type Holder, type HolderReport } from '../gate/stale';
import type { GpuEvaluation } from '../gate/wait';
import type { ErrorJson } from './error-json';

/** Who owns a holder and where it lives, as `--json` prints it (the command line whole, one string per argument). */
export interface OwnerJson {
  uid: number | null;
  user: string | null;
  /** Epoch milliseconds. */
  startedAt: number | null;
  /** Its age at the snapshot. */
  ageMs: number | null;
  argv: string[] | null;
  location: {
    unit: string | null;
    userManagerUid: number | null;
    container: { runtime: string | null; id: string } | null;
    pod: { uid: string; qosClass: string } | null;
  };
}

/** An owner's JSON form; null when it was not read. */
export function ownerJson(owner: ProcessOwner | null | undefined): OwnerJson | null {
  if (owner === null || owner === undefined) return null;
  const { unit, userManagerUid, container, pod } = owner.location;
  return {
    uid: owner.uid,
    user: owner.user,
    startedAt: owner.startedAt,
    ageMs: owner.ageMs,
    argv: owner.argv === null ? null : [...owner.argv],
    location: {
      unit,
      userManagerUid,
      container: container === null ? null : { runtime: container.runtime, id: container.id },
      pod: pod === null ? null : { uid: pod.uid, qosClass: pod.qosClass },
    },
  };
}

/** A holder as `--json` prints it. */
export interface HolderJson {
  pid: number;
  class: string;
  name: string;
  comm: string | null;
  cmdline: string | null;
  usedBytes: number | null;
  gpus: number[];
  state: string | null;
  ppid: number | null;
  unit: string | null;
  cgroup: string | null;
  owner: OwnerJson | null;
  reason: string | null;
}

/** One GPU as `--json` prints it. */
export interface GpuJson {
  index: number;
  uuid: string | null;
  pciBusId: string | null;
  name: string | null;
  /** default, exclusive_thread, prohibited, exclusive_process; null when unread. */
  computeMode: string | null;
  totalBytes: number | null;
  usedBytes: number | null;
  reservedBytes: number | null;
  /** Whether usedBytes includes reservedBytes (see GpuEvaluation.reservedInUsed). */
  reservedInUsed: boolean | null;
  freeBytes: number | null;
  neededFreeBytes: number | null;
  /** With --for ENGINE: what the engine would see at its start (see GpuEvaluation.engineView); else null. */
  engineView: EngineView | null;
  maxUsedBytes: number | null;
  stableForMs: number;
  settled: boolean;
  ok: boolean;
  reasons: string[];
  holders: HolderJson[];
  /** Why the holders cannot be named (see GpuEvaluation.holdersUnknown); null when NVML listed them. */
  holdersUnknown: string | null;
  unattributedBytes: number | null;
  error: { code: string; message: string } | null;
}

/** The whole `--json` object. */
export interface ResultJson {
  command: string;
  /** 'ready' | 'busy' | 'timeout' | 'interrupted' | 'unavailable' | 'usage-error' | 'config-error' | … */
  result: string;
  exitCode: number;
  /** One line saying why (also what --report-file writes). */
  reason: string;
  elapsedMs: number;
  polls: number;
  selection: { source: string; warnings: string[] } | null;
  library: { path: string; driverVersion: string | null; nvmlVersion: string | null; cudaDriverVersion: string | null } | null;
  gpus: GpuJson[];
  stale: {
    holders: HolderJson[];
    shm: { leaked: unknown[]; tmpfsFreeBytes: number | null; tmpfsTotalBytes: number | null } | null;
  };
  actions: { signals: unknown[]; shm: unknown[] };
  error: ErrorJson | null;
}

/** A holder's JSON form; `usedBytes` is its total over `gpus`. */
export function holderJson(holder: Holder): HolderJson {
  return {
    pid: holder.pid,
    class: holder.class,
    name: holderName(holder),
    comm: holder.comm,
    cmdline: holder.cmdline,
    usedBytes: holder.usedBytes,
    gpus: [...holder.gpus],
    state: holder.state,
    ppid: holder.ppid,
    unit: holder.unit,
    cgroup: holder.cgroup,
    owner: ownerJson(holder.owner),
    reason: holder.reason,
  };
}

/** A holder's JSON form as listed under GPU `gpu`: `usedBytes` is what it holds on that GPU alone. */
export function holderOnGpuJson(holder: Holder, gpu: number): HolderJson {
  return { ...holderJson(holder), usedBytes: usedBytesOn(holder, gpu) };
}

/** A GPU's JSON form. */
export function gpuJson(gpu: GpuEvaluation): GpuJson {
  const memory = gpu.memory;
  return {
    index: gpu.index,
    uuid: gpu.uuid,
    pciBusId: gpu.pciBusId,
    name: gpu.name,
    computeMode: gpu.computeMode,
    totalBytes: memory?.totalBytes ?? null,
    usedBytes: memory?.usedBytes ?? null,
    reservedBytes: memory?.reservedBytes ?? null,
    reservedInUsed: gpu.reservedInUsed,
    freeBytes: memory?.freeBytes ?? null,
    neededFreeBytes: gpu.neededFreeBytes,
    engineView: gpu.engineView === null ? null : { ...gpu.engineView },
    maxUsedBytes: gpu.maxUsedBytes,
    stableForMs: Math.round(gpu.stableForMs),
    settled: gpu.settled,
    ok: gpu.ok,
    reasons: [...gpu.reasons],
    holders: gpu.holders.map((holder) => holderOnGpuJson(holder, gpu.index)),
    holdersUnknown: gpu.holdersUnknown,
    unattributedBytes: gpu.unattributedBytes,
    error: gpu.error === null ? null : { code: gpu.error.code, message: gpu.error.message },
  };
}

/** Stale holders (one entry per pid, stale classes only), plus leaked shm. */
export function staleJson(holders: readonly Holder[], shm: HolderReport['shm'] | null): ResultJson['stale'] {
  const byPid = new Map<number, HolderJson>();
  for (const holder of holders) {
    if (isStaleHolder(holder) && !byPid.has(holder.pid)) byPid.set(holder.pid, holderJson(holder));
  }
  return {
    holders: [...byPid.values()],
    shm: shm === null ? null : { leaked: [...shm.leaked], tmpfsFreeBytes: shm.tmpfsFreeBytes, tmpfsTotalBytes: shm.tmpfsTotalBytes },
  };
}
