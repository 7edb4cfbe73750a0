/**
 * The evaluation of one read against the criteria: per selected GPU (or MIG instance) whether it
 * is free, why not, who holds it and how long its free memory has held still. Process lists and
 * the compute mode a read did not include are carried over from the latest read that did.
 */
import { gpuLabel } from './gpu-label';
import type { FieldError, GpuDevice, GpuMemory, GpuProcess, MigDevice, Snapshot } from '../types';
import type { DeviceSelection } from './devices';
import { engineView, isEngineMinFree, type EngineView } from './engine-view';
import { neededFreeBytes, maxUsedBytes, nothingLeftToFree, releasingHolders, reservedInUsed, usedExcludingReserved, type Criteria, type StabilityTracker } from './criteria';
import { daemonNamed, disregardedDaemons } from './ignored-daemons';
import type { ReadPlan } from './poller';
import { classifyHolder, listedProcesses, unattributedBytesOf, type Holder, type InspectContext } from './stale';
import { readProcess } from '../host/procfs';
import { holdersUnknownReason } from './holders-unknown';
import { hopelessDevice, hopelessMigReading, implausibleMemoryError } from './hopeless-gpu';

/**
 * Why a GPU is not (yet) acceptable. 'compute-mode': no new CUDA context can be created there
 * (compute mode prohibited, or exclusive_process with a context already on it).
 */
export type GpuFailureReason = 'memory' | 'processes' | 'unstable' | 'error' | 'compute-mode';

/** The state of one selected GPU (or MIG instance) at one poll. */
export interface GpuEvaluation {
  index: number;
  /** The GPU's UUID, or the MIG instance's when a MIG instance was selected; null (as pciBusId and name) when NVML could not identify the GPU. */
  uuid: string | null;
  pciBusId: string | null;
  name: string | null;
  /** Set when the evaluation is of a MIG instance of GPU `index`. */
  migUuid: string | null;
  /** The GPU's compute mode (null when unread, e.g. with memoryOnly snapshots). */
  computeMode: GpuDevice['computeMode'];
  memory: GpuMemory | null;
  /**
   * Whether the reading's used figure includes the driver's reserved memory (v1 always; v2 on a
   * driver with NVIDIA's R525 reference semantics); null when the reading cannot tell or is unread.
   * maxUsed is compared with used excluding reserved either way.
   */
  reservedInUsed: boolean | null;
  neededFreeBytes: number | null;
  /** With an engine's minFree: what the engine would see at its start, and its verdict; else null. */
  engineView: EngineView | null;
  maxUsedBytes: number | null;
  stableForMs: number;
  /** Nothing is left that could still free memory (no counted holder, used memory at the idle level): stable without waiting out stableMs. */
  settled: boolean;
  ok: boolean;
  reasons: GpuFailureReason[];
  /** Listed processes that count (ignored ones are in ignoredPids). */
  holders: Holder[];
  /**
   * Why the holders cannot be named (NVML's process list unreadable: NO_PERMISSION, NOT_SUPPORTED…)
   * and what would let gpugate see them; null when the list was read. `holders` is then empty
   * because nobody knows, not because nobody holds the GPU.
   */
  holdersUnknown: string | null;
  ignoredPids: number[];
  unattributedBytes: number | null;
  error: FieldError | null;
}

/** One evaluated poll. */
export interface Evaluation {
  elapsedMs: number;
  /** Polls evaluated by this wait so far. */
  polls: number;
  ok: boolean;
  devices: GpuEvaluation[];
  snapshot: Snapshot;
  selection: DeviceSelection;
}

/** What the last process-list read of one unit found: carried over by the polls that read memory only. */
export interface KnownHolders {
  processes: GpuProcess[] | null;
  all: Holder[];
  /** The pids of `all` proven to be ignored daemons. */
  daemonPids: ReadonlySet<number>;
  /** Used memory when the list was read: a move beyond the tolerance makes the lists be read again. */
  usedAtRead: number | null;
  /** Why the list could not be read (its field error), kept for the polls that carry it over. */
  failure: FieldError | undefined;
}

/** Everything a wait decides with, prepared once. */
export interface WaitState {
  selection: DeviceSelection;
  criteria: Criteria;
  tracker: StabilityTracker;
  /** The holder-inspection context, read from /proc on first use (an idle GPU has no holder to inspect); null: not inspected. */
  inspectContext: (() => Promise<InspectContext>) | null;
  startMs: number;
  polls: number;
  /** Which (index, MIG uuid) units to evaluate. */
  units: Array<{ index: number; migUuid: string | null }>;
  /** A MIG instance is selected: its memory is read only with every field. */
  full: boolean;
  /** Per unit key, the holders as last read. */
  known: Map<string, KnownHolders>;
  /** Per GPU index, the compute mode as last read. */
  computeModes: Map<number, GpuDevice['computeMode']>;
  /** The latest evaluation. */
  last: Evaluation | null;
}

/** A MIG instance's process list as read: absent when not asked for, null when asked for but unreadable (its error says why). */
function migProcessesOf(mig: MigDevice, plan: ReadPlan): GpuProcess[] | null | undefined {
  if (mig.processes !== undefined) return mig.processes;
  return plan.processes ? null : undefined;
}

/** The MIG instance's error when it is its process list's failure. */
function migProcessListError(mig: MigDevice): FieldError | undefined {
  return mig.error !== null && mig.error.fn.includes('RunningProcess') ? mig.error : undefined;
}

/** True when no new CUDA context can be created on the GPU because of its compute mode. */
function computeModeBlocks(mode: GpuDevice['computeMode'], processes: GpuProcess[] | null | undefined): boolean {
  if (mode === 'prohibited') return true;
  // exclusive_process: one context at a time; an unreadable list cannot prove there is none.
  return mode === 'exclusive_process' && (processes === null || processes === undefined || processes.length > 0);
}

/** The holders of one unit's process list, and which of them are ignored daemons (see ignored-daemons.ts). */
async function holdersOf(processes: GpuProcess[] | null | undefined, index: number, takenAt: number, state: WaitState): Promise<Pick<KnownHolders, 'all' | 'daemonPids'>> {
  const listed = listedProcesses([{ index, processes: processes ?? [] } as GpuDevice]);
  const all = await Promise.all(
    listed.map(async (entry): Promise<Holder> => {
      if (state.inspectContext) return classifyHolder(entry, takenAt, await state.inspectContext());
      const info = await readProcess(entry.pid);
      return {
        pid: entry.pid,
        class: 'unverifiable',
        gpus: entry.gpus,
        usedBytes: entry.usedBytes,
        usedBytesPerGpu: entry.usedBytesPerGpu,
        comm: info.kind === 'ok' ? info.comm : null,
        cmdline: info.kind === 'ok' ? info.cmdline : null,
        state: info.kind === 'ok' ? info.stat.state : null,
        ppid: info.kind === 'ok' ? info.stat.ppid : null,
        cgroup: info.kind === 'ok' ? info.cgroup : null,
        unit: null,
        startTime: null,
        owner: null,
        reason: 'not inspected (inspectHolders: false)',
      };
    }),
  );
  // Only a holder carrying a daemon's name needs the proof (and the inspection context's /proc).
  if (!all.some((holder) => daemonNamed(holder.comm, state.criteria.ignoreDaemons) !== null)) return { all, daemonPids: new Set() };
  const procRoot = state.inspectContext ? (await state.inspectContext()).procRoot : '/proc';
  const daemons = await disregardedDaemons(all, state.criteria.ignoreDaemons, procRoot);
  return { all: daemons.holders, daemonPids: daemons.pids };
}

/** One evaluated read, and whether it read every field the verdict rests on (process lists and compute mode). */
export interface EvaluatedRead {
  evaluation: Evaluation;
  /** False when the verdict rests on process lists or a compute mode carried over from an earlier read. */
  confirmed: boolean;
  /** A GPU failing on memory names holders from process lists read before its used memory moved. */
  holdersOutdated: boolean;
}

/**
 * True when used memory moved beyond the tolerance since the unit's process lists were read (or
 * there is no such read to compare with): who holds the GPU may have changed.
 */
export function movedSinceListRead(memory: GpuMemory | null, known: Pick<KnownHolders, 'usedAtRead'> | undefined, toleranceBytes: number): boolean {
  if (memory === null || known === undefined || known.usedAtRead === null) return true;
  return Math.abs(usedExcludingReserved(memory) - known.usedAtRead) > toleranceBytes;
}

/**
 * Evaluates one read against the criteria as poll number `polls`. Process lists and the compute
 * mode that the read did not include (see `plan`) are taken from the latest read that did.
 * Null when the read lacks a selected GPU (a shared poll taken before this waiter joined).
 */
export async function evaluateRead(snapshot: Snapshot, plan: ReadPlan, receivedAtMs: number, state: WaitState, useStability: boolean, polls: number): Promise<EvaluatedRead | null> {
  const devices: GpuEvaluation[] = [];
  let confirmed = true;
  let holdersOutdated = false;
  for (const unit of state.units) {
    const device = snapshot.devices.find((d) => d.index === unit.index);
    if (!device) return null;
    const fatal = hopelessDevice(device, unit.migUuid === null, state.criteria);
    if (fatal) throw fatal;
    const mig = unit.migUuid === null ? null : (device.migDevices ?? []).find((m) => m.uuid === unit.migUuid) ?? null;
    const wholeGpu = mig === null ? null : hopelessMigReading(device, mig, state.criteria);
    if (wholeGpu) throw wholeGpu;
    const key = unit.migUuid ?? String(unit.index);
    const memory = mig ? mig.memory : device.memory;
    const read = mig ? migProcessesOf(mig, plan) : device.processes;
    const error = device.error ?? mig?.error ?? device.fieldErrors.memory ?? null;
    const reasons: GpuEvaluation['reasons'] = [];
    const label = gpuLabel({ index: device.index, uuid: unit.migUuid ?? device.uuid, pciBusId: null });
    const implausible = implausibleMemoryError(device, memory, label, state.criteria);
    if (implausible) throw implausible;
    let computeMode = device.computeMode;
    if (computeMode !== null || plan.computeMode || plan.full) state.computeModes.set(device.index, computeMode);
    else {
      computeMode = state.computeModes.get(device.index) ?? null;
      confirmed = false;
    }
    let known = state.known.get(key);
    if (read !== undefined) {
      const failure = mig ? migProcessListError(mig) : device.fieldErrors.processes;
      known = { processes: read, ...(await holdersOf(read, unit.index, snapshot.takenAt, state)), usedAtRead: memory ? usedExcludingReserved(memory) : null, failure };
      state.known.set(key, known);
    } else confirmed = false;
    const processes = known?.processes;
    let needed: number | null = null;
    let view: EngineView | null = null;
    let maxUsed: number | null = null;
    let stableForMs = 0;
    if (!memory) {
      // Without a memory criterion (noProcesses alone) unreadable memory does not block.
      if (state.criteria.minFree !== null || state.criteria.maxUsed !== null) reasons.push('error');
      state.tracker.reset(key);
    } else {
      needed = neededFreeBytes(state.criteria, { name: device.name, totalBytes: memory.totalBytes, reservedBytes: memory.reservedBytes }, label);
      if (state.criteria.minFree !== null && isEngineMinFree(state.criteria.minFree)) {
        view = engineView(state.criteria.minFree, { name: device.name, totalBytes: memory.totalBytes, reservedBytes: memory.reservedBytes, freeBytes: memory.freeBytes });
      }
      maxUsed = maxUsedBytes(state.criteria, memory.totalBytes);
      if ((needed !== null && memory.freeBytes < needed) || (maxUsed !== null && usedExcludingReserved(memory) > maxUsed)) reasons.push('memory');
      stableForMs = useStability ? state.tracker.update(key, memory.freeBytes, receivedAtMs) : 0;
    }
    const all = known?.all ?? [];
    const daemonPids = known?.daemonPids;
    const holders = all.filter(
      (h) => !state.criteria.ignorePids.has(h.pid) && !(h.comm !== null && state.criteria.ignoreNames.has(h.comm)) && daemonPids?.has(h.pid) !== true,
    );
    const ignoredPids = all.filter((h) => !holders.includes(h)).map((h) => h.pid);
    if (state.criteria.noProcesses) {
      if (processes === null || processes === undefined) {
        if (!reasons.includes('error')) reasons.push('error');
      } else if (holders.length > 0) reasons.push('processes');
    }
    if (computeModeBlocks(computeMode, processes)) reasons.push('compute-mode');
    // Settled needs one quiet poll too (stableForMs > 0): memory that flaps with no listed holder
    // is never "nothing left to free".
    const settled =
      stableForMs > 0 &&
      memory !== null &&
      processes !== null &&
      processes !== undefined &&
      nothingLeftToFree(
        usedExcludingReserved(memory),
        holders,
        all.filter((h) => !holders.includes(h)).map((h) => h.usedBytes),
        state.criteria.stableToleranceBytes,
      );
    if (memory && useStability && stableForMs < state.criteria.stableMs && !settled) reasons.push('unstable');
    // A listed holder still releasing its memory hands it back in one step: memory that holds
    // still until then is not stable, however long the window. (Said only where nothing else fails.)
    else if (memory && useStability && reasons.length === 0 && releasingHolders(holders).length > 0) reasons.push('unstable');
    devices.push({
      index: device.index,
      uuid: unit.migUuid ?? device.uuid,
      pciBusId: device.pciBusId,
      name: device.name,
      migUuid: unit.migUuid,
      computeMode,
      memory,
      reservedInUsed: memory === null ? null : reservedInUsed(memory),
      neededFreeBytes: needed,
      engineView: view,
      maxUsedBytes: maxUsed,
      stableForMs,
      settled,
      ok: reasons.length === 0,
      reasons,
      holders,
      holdersUnknown: holdersUnknownReason(processes, known?.failure),
      ignoredPids,
      unattributedBytes: unattributedBytesOf(memory, processes),
      error: reasons.includes('error') ? (error ?? (processes === null ? known?.failure ?? null : null)) : null,
    });
    // A busy GPU's holders name who keeps it busy: lists carried over from before its memory moved may no longer.
    if (read === undefined && reasons.includes('memory') && movedSinceListRead(memory, known, state.criteria.stableToleranceBytes)) holdersOutdated = true;
  }
  const evaluation: Evaluation = {
    elapsedMs: Math.max(0, receivedAtMs - state.startMs),
    polls,
    ok: devices.every((d) => d.ok),
    devices,
    snapshot,
    selection: state.selection,
  };
  return { evaluation, confirmed, holdersOutdated };
}

