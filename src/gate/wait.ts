/**
 * waitForGpusFree and checkGpusOnce: resolve which GPUs to watch, poll them through the shared
 * poller, evaluate each poll against the criteria (memory thresholds, processes, stability),
 * classify the holders, and settle: success once every selected GPU is free and stable, a
 * GpuWaitTimeoutError after timeoutMs, an AbortError on abort, and the NvmlError at once when
 * waiting cannot help (GPU lost, NVML unusable, a hung call).
 */
import { performance } from 'node:perf_hooks';
import type { FieldError, GpuDevice, GpuMemory, GpuProcess, MigDevice, NvmlMemoryReader, NvmlSession, OpenNvmlOptions, Snapshot } from '../types';
import { formatBytes } from '../units';
import { emptySelectionError, selectDevices, type DeviceSelection, type SelectableDevice } from './devices';
import { DeviceSelectionError } from './device-selection-error';
import { engineView, isEngineMinFree, type EngineView } from './engine-view';
import { gpuLabel } from './gpu-label';
import { resolveCriteria, neededFreeBytes, maxUsedBytes, implausibleMemory, nothingLeftToFree, releasingHolders, reservedInUsed, usedExcludingReserved, StabilityTracker, type Criteria, type CriteriaOptions } from './criteria';
import { DEFAULT_INTERVAL_MS } from './gate-defaults';
import { daemonNamed, disregardedDaemons } from './ignored-daemons';
import { SnapshotPoller, snapshotOptionsFor, type PollResult, type ReadPlan } from './poller';
import { GpuWaitTimeoutError } from './wait-timeout-error';
import { ErrorCode, GpugateError } from '../gpugate-error';
import { ConfigError } from '../config-error';
import { formatDuration, MAX_DURATION_MS } from '../units';
import { classifyHolder, listedProcesses, prepareInspectContext, unattributedBytesOf, type Holder, type InspectContext, type InspectOptions } from './stale';
import { readProcess } from '../host/procfs';
import { holdersUnknownReason } from './holders-unknown';
import { GPUGATE_MEMORY_IMPLAUSIBLE, GPUGATE_MEMORY_UNJUDGEABLE, GPUGATE_RECOVERY_REQUIRED, NvmlError, isFatalNvmlError } from '../nvml/nvml-error';
import { recoveryRemedy } from '../nvml/recovery-action';
import { openNvml } from '../nvml/session';

/** Options of waitForGpusFree (and checkGpusOnce, which ignores the timing ones). */
export interface WaitOptions extends CriteriaOptions {
  /**
   * GPU selectors: NVML indices as numbers (`[0, 1]`) or strings, GPU-/MIG- UUIDs or unique prefixes,
   * PCI bus ids; default from the environment.
   */
  gpus?: ReadonlyArray<string | number>;
  /** An open session to use (left open); otherwise one is opened (shared in-process) and closed. */
  session?: NvmlSession;
  /** NVML library path when a session is opened here. */
  libraryPath?: string;
  /** Per-call NVML deadline when a session is opened here. */
  callTimeoutMs?: number;
  /** Give up after this long (default: never). */
  timeoutMs?: number;
  /** Time between polls (default DEFAULT_INTERVAL_MS, 500). */
  intervalMs?: number;
  signal?: AbortSignal;
  /** Called after every evaluated poll. */
  onPoll?: (evaluation: Evaluation) => void;
  /** Classify holders on every poll (default true); an object gives the procfs roots etc. */
  inspectHolders?: boolean | InspectOptions;
  /** Environment for device selection (default process.env). */
  env?: NodeJS.ProcessEnv;
  /**
   * Accept a selection of no GPU at all (`gpus: []`, CUDA_VISIBLE_DEVICES=-1, NVIDIA_VISIBLE_DEVICES=none,
   * a host without GPUs) and succeed at once. Default false: an empty selection rejects with a
   * DeviceSelectionError, since "nothing to check" must not read as "free".
   */
  allowEmptySelection?: boolean;
}

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

/** Success of waitForGpusFree. */
export interface WaitResult {
  elapsedMs: number;
  polls: number;
  devices: GpuEvaluation[];
  evaluation: Evaluation;
}

/**
 * Rejection of waitForGpusFree when its signal aborts; carries the last evaluation if any, and the
 * signal's reason as its `cause`. Named 'AbortError' like every abort on the platform.
 */
export class GpuWaitAbortError extends GpugateError {
  override readonly name = 'AbortError';
  declare readonly code: typeof ErrorCode.aborted;
  readonly evaluation: Evaluation | null;

  constructor(evaluation: Evaluation | null, reason?: unknown) {
    super(ErrorCode.aborted, `waiting for GPUs was aborted${reason instanceof Error ? `: ${reason.message}` : ''}`, { cause: reason });
    this.evaluation = evaluation;
  }
}

/** Time between polls when intervalMs is not given (declared with the other gate defaults). */
export { DEFAULT_INTERVAL_MS } from './gate-defaults';

// ---------------------------------------------------------------- sessions

interface SharedSession {
  session: Promise<NvmlSession>;
  refs: number;
}
const sharedSessions = new Map<string, SharedSession>();
const deviceLists = new WeakMap<NvmlSession, Promise<GpuDevice[]>>();

/** The session to use: the caller's (left open), or one opened here and shared in-process; `release` closes what was opened. */
export async function acquireSession(options: Pick<WaitOptions, 'session' | 'libraryPath' | 'callTimeoutMs'>): Promise<{ session: NvmlSession; release: () => Promise<void> }> {
  if (options.session) return { session: options.session, release: async () => {} };
  const key = `${options.libraryPath ?? ''}\u0000${options.callTimeoutMs ?? ''}`;
  let entry = sharedSessions.get(key);
  if (!entry || entry.refs === 0) {
    const openOptions: OpenNvmlOptions = {};
    if (options.libraryPath !== undefined) openOptions.libraryPath = options.libraryPath;
    if (options.callTimeoutMs !== undefined) openOptions.callTimeoutMs = options.callTimeoutMs;
    entry = { session: openNvml(openOptions), refs: 0 };
    sharedSessions.set(key, entry);
  }
  const current = entry;
  current.refs += 1;
  let session: NvmlSession;
  try {
    session = await current.session;
  } catch (error) {
    current.refs -= 1;
    if (sharedSessions.get(key) === current) sharedSessions.delete(key);
    throw error;
  }
  let released = false;
  return {
    session,
    release: async () => {
      if (released) return;
      released = true;
      current.refs -= 1;
      if (current.refs === 0) {
        if (sharedSessions.get(key) === current) sharedSessions.delete(key);
        await session.close().catch(() => {});
      }
    },
  };
}

/** Every device with every field, MIG instances included: what a selection by MIG UUID needs. Read once per session. */
function deviceList(session: NvmlSession): Promise<GpuDevice[]> {
  let list = deviceLists.get(session);
  if (!list) {
    list = session.snapshot().then((snapshot) => snapshot.devices);
    deviceLists.set(session, list);
    list.catch(() => deviceLists.delete(session));
  }
  return list;
}

// ---------------------------------------------------------------- evaluation

/** What the last process-list read of one unit found: carried over by the polls that read memory only. */
interface KnownHolders {
  processes: GpuProcess[] | null;
  all: Holder[];
  /** The pids of `all` proven to be ignored daemons. */
  daemonPids: ReadonlySet<number>;
  /** Used memory when the list was read: a move beyond the tolerance makes the next poll read the list again. */
  usedAtRead: number | null;
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

function unitsOf(selection: DeviceSelection, devices: readonly SelectableDevice[]): Array<{ index: number; migUuid: string | null }> {
  const units: Array<{ index: number; migUuid: string | null }> = [];
  for (const index of selection.indices) {
    const device = devices.find((d) => d.index === index);
    const migs = (device?.migDevices ?? []).filter((m) => selection.migUuids.includes(m.uuid));
    if (migs.length === 0) units.push({ index, migUuid: null });
    else for (const mig of migs) units.push({ index, migUuid: mig.uuid });
  }
  return units;
}

function fatalFromDevice(device: GpuDevice): Error | null {
  // A fatal code on the memory read (the one field every criterion needs) ends the wait too.
  const error = device.error ?? device.fieldErrors['memory'] ?? null;
  if (!error || !isFatalNvmlError(error)) return null;
  return new NvmlError({
    code: error.code,
    nvmlReturn: error.nvmlReturn,
    fn: error.fn,
    device: device.index,
    message: `${gpuLabel(device)}: ${error.message}; waiting cannot help`,
  });
}

/**
 * A GPU whose driver names a recovery action (reset, reboot, drain: NVML's field 230, changed
 * with Xid 154) will not free up by waiting: end at once, naming the action and the operator's
 * step. An unreadable action (older drivers) gates nothing.
 */
function recoveryRequired(device: GpuDevice): Error | null {
  const action = device.recoveryAction;
  if (action === null || action === 'none') return null;
  return new NvmlError({
    code: GPUGATE_RECOVERY_REQUIRED,
    nvmlReturn: null,
    fn: 'nvmlDeviceGetFieldValues',
    device: device.index,
    message:
      `${gpuLabel(device)} needs recovery action ${action} (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION; Xid 154): ` +
      `waiting cannot help; ${recoveryRemedy(action, device.index)}`,
  });
}

/**
 * Unified-memory GPUs (GH200, GB200, GB10, Jetson) can report no device memory figures at all
 * (both queries NOT_SUPPORTED, or a total of 0). A memory criterion can then never be met, so
 * say so at once instead of polling until the timeout.
 */
function unjudgeableMemory(device: GpuDevice, criteria: Criteria): Error | null {
  if (criteria.minFree === null && criteria.maxUsed === null) return null;
  const failure = device.fieldErrors['memory'];
  const notSupported = failure?.code === 'NVML_ERROR_NOT_SUPPORTED';
  if (!notSupported && !(device.memory !== null && device.memory.totalBytes === 0)) return null;
  const why = notSupported ? `${failure.fn} answers NOT_SUPPORTED` : 'its total memory is 0';
  return new NvmlError({
    code: failure?.code ?? 'NVML_ERROR_NOT_SUPPORTED',
    nvmlReturn: failure?.nvmlReturn ?? 3,
    fn: failure?.fn ?? 'nvmlDeviceGetMemoryInfo_v2',
    device: device.index,
    message:
      `${gpuLabel(device)} reports no device memory figures (${why}), as unified-memory ` +
      'systems (GH200, GB200, GB10, Jetson) can: a free-memory criterion cannot be judged there and waiting cannot help; ' +
      'use --no-processes (noProcesses) instead',
  });
}

/**
 * A GPU whose memory cannot be read here for want of permission (inside a container, NVML answers
 * NO_PERMISSION for a MIG GPU's parent) can never be judged: say so at once, naming what would
 * help, instead of polling until the timeout. Only where a memory criterion applies.
 */
function memoryWithoutPermission(device: GpuDevice, criteria: Criteria): Error | null {
  if (criteria.minFree === null && criteria.maxUsed === null) return null;
  const failure = device.fieldErrors['memory'];
  if (failure?.code !== 'NVML_ERROR_NO_PERMISSION') return null;
  return new NvmlError({
    code: failure.code,
    nvmlReturn: failure.nvmlReturn,
    fn: failure.fn,
    device: device.index,
    message:
      `${gpuLabel(device)}: ${failure.fn} answers NO_PERMISSION, as a MIG GPU's parent does ` +
      'inside a container: its memory cannot be judged here and waiting cannot help; select the MIG instance ' +
      '(its MIG- UUID, as the container runtime sets CUDA_VISIBLE_DEVICES), or run gpugate as root on the host',
  });
}

/**
 * A MIG instance that reports the whole GPU's memory as its own (as NVML can inside a container)
 * says nothing about the slice: free memory of the whole GPU is not the slice's. Only where a
 * memory criterion applies, and only when the parent's total is known to compare with.
 */
function migReportsWholeGpu(device: GpuDevice, mig: MigDevice, criteria: Criteria): Error | null {
  if (criteria.minFree === null && criteria.maxUsed === null) return null;
  if (mig.memory === null || device.memory === null || mig.memory.totalBytes < device.memory.totalBytes) return null;
  const fn = mig.memory.source === 'v2' ? 'nvmlDeviceGetMemoryInfo_v2' : 'nvmlDeviceGetMemoryInfo';
  return new NvmlError({
    code: GPUGATE_MEMORY_UNJUDGEABLE,
    nvmlReturn: null,
    fn,
    device: device.index,
    message:
      `${gpuLabel({ index: device.index, uuid: mig.uuid, pciBusId: device.pciBusId })}: the MIG instance reports the whole GPU's memory as its own ` +
      `(total ${formatBytes(mig.memory.totalBytes)}, the GPU's ${formatBytes(device.memory.totalBytes)}): its own free memory cannot be judged here ` +
      'and waiting cannot help; run gpugate where NVML reports per-instance memory (on the host, as root)',
  });
}

/**
 * A memory reading whose numbers do not add up ends the wait at once: it comes from a wrongly
 * laid out struct or a faulty driver, and any verdict drawn from it could say "free" on a busy
 * GPU. Only where a memory criterion applies.
 */
function implausibleMemoryError(device: GpuDevice, memory: GpuMemory | null, label: string, criteria: Criteria): Error | null {
  if (memory === null || (criteria.minFree === null && criteria.maxUsed === null)) return null;
  const why = implausibleMemory(memory);
  if (why === null) return null;
  const fn = memory.source === 'v2' ? 'nvmlDeviceGetMemoryInfo_v2' : 'nvmlDeviceGetMemoryInfo';
  return new NvmlError({
    code: GPUGATE_MEMORY_IMPLAUSIBLE,
    nvmlReturn: null,
    fn,
    device: device.index,
    message: `${label}${device.pciBusId === null ? '' : `, ${device.pciBusId}`}: ${fn} reported implausible memory figures (${why}); the GPU cannot be judged and is never reported free`,
  });
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
}

/**
 * Evaluates one read against the criteria as poll number `polls`. Process lists and the compute
 * mode that the read did not include (see `plan`) are taken from the latest read that did.
 * Null when the read lacks a selected GPU (a shared poll taken before this waiter joined).
 */
export async function evaluateRead(snapshot: Snapshot, plan: ReadPlan, receivedAtMs: number, state: WaitState, useStability: boolean, polls: number): Promise<EvaluatedRead | null> {
  const devices: GpuEvaluation[] = [];
  let confirmed = true;
  for (const unit of state.units) {
    const device = snapshot.devices.find((d) => d.index === unit.index);
    if (!device) return null;
    const fatal =
      fatalFromDevice(device) ?? recoveryRequired(device) ?? (unit.migUuid === null ? (unjudgeableMemory(device, state.criteria) ?? memoryWithoutPermission(device, state.criteria)) : null);
    if (fatal) throw fatal;
    const mig = unit.migUuid === null ? null : (device.migDevices ?? []).find((m) => m.uuid === unit.migUuid) ?? null;
    const wholeGpu = mig === null ? null : migReportsWholeGpu(device, mig, state.criteria);
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
      known = { processes: read, ...(await holdersOf(read, unit.index, snapshot.takenAt, state)), usedAtRead: memory ? usedExcludingReserved(memory) : null };
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
      holdersUnknown: holdersUnknownReason(processes, mig ? migProcessListError(mig) : device.fieldErrors.processes),
      ignoredPids,
      unattributedBytes: unattributedBytesOf(memory, processes),
      error: reasons.includes('error') ? (error ?? (processes === null ? device.fieldErrors.processes ?? null : null)) : null,
    });
  }
  const evaluation: Evaluation = {
    elapsedMs: Math.max(0, receivedAtMs - state.startMs),
    polls,
    ok: devices.every((d) => d.ok),
    devices,
    snapshot,
    selection: state.selection,
  };
  return { evaluation, confirmed };
}

/** The reasons a read that did not include every field may only seem to fail or pass by. */
const CARRIED_REASONS: ReadonlySet<GpuFailureReason> = new Set(['compute-mode', 'processes']);

/**
 * True when `read` would make the verdict "ready" but rests on process lists or a compute mode
 * carried over from an earlier read: the decision is then confirmed by a read of every field.
 * `partial`: the verdict may rest on some of the GPUs (a caller's accept predicate), so one GPU
 * that may pass on carried-over fields is enough to confirm.
 */
export function needsConfirmation(read: EvaluatedRead, partial = false): boolean {
  if (read.confirmed) return false;
  const mayPass = (gpu: GpuEvaluation): boolean => gpu.reasons.every((reason) => CARRIED_REASONS.has(reason));
  return partial ? read.evaluation.devices.some(mayPass) : read.evaluation.devices.every(mayPass);
}

/** The read that confirms a decision: memory, compute mode and process lists. */
export function confirmingPlan(state: WaitState): ReadPlan {
  return { processes: true, computeMode: true, full: state.full };
}

/**
 * True when the next poll may pass `gpu` if its memory reads as in this one: nothing but the
 * stability window or carried-over fields holds it back, and the window ends by then (it will
 * have lasted one interval more) or nothing is left to free.
 */
function mayPassNextPoll(gpu: GpuEvaluation, state: WaitState, intervalMs: number): boolean {
  if (!gpu.reasons.every((reason) => reason === 'unstable' || CARRIED_REASONS.has(reason))) return false;
  if (!gpu.reasons.includes('unstable') || gpu.stableForMs + intervalMs >= state.criteria.stableMs) return true;
  const known = state.known.get(gpu.migUuid ?? String(gpu.index));
  if (gpu.memory === null || known === undefined || known.processes === null) return false;
  const ignoredBytes = known.all.filter((holder) => !gpu.holders.includes(holder)).map((holder) => holder.usedBytes);
  return nothingLeftToFree(usedExcludingReserved(gpu.memory), gpu.holders, ignoredBytes, state.criteria.stableToleranceBytes);
}

/** What the poll after the latest one may decide on. */
export interface ReadAhead {
  intervalMs: number;
  /** The verdict may rest on some of the GPUs (a caller's accept predicate), not all. */
  partial: boolean;
}

/**
 * What the next poll reads. Memory always. Process lists when the decision or its explanation
 * needs them: before anything is known, with noProcesses, while a GPU's memory is not free (who
 * holds it), for an exclusive-process GPU, and when used memory moved since the list was read
 * (the holders may have changed). The compute mode only on the first read, and on a poll that
 * may end the wait if memory holds still (every field then, so that no confirming read re-reads
 * memory); any other decision that would end the wait is confirmed with a fresh read (see
 * needsConfirmation).
 */
export function nextReadPlan(state: WaitState, ahead: ReadAhead): ReadPlan {
  const last = state.last;
  if (last === null) return confirmingPlan(state);
  const mayPass = (gpu: GpuEvaluation): boolean => mayPassNextPoll(gpu, state, ahead.intervalMs);
  if (ahead.partial ? last.devices.some(mayPass) : last.devices.every(mayPass)) return confirmingPlan(state);
  const tolerance = state.criteria.stableToleranceBytes;
  const processes =
    state.criteria.noProcesses ||
    last.devices.some((gpu) => {
      if (gpu.memory === null || gpu.reasons.includes('memory') || gpu.reasons.includes('error') || gpu.computeMode === 'exclusive_process') return true;
      const known = state.known.get(gpu.migUuid ?? String(gpu.index));
      return known === undefined || known.usedAtRead === null || Math.abs(usedExcludingReserved(gpu.memory) - known.usedAtRead) > tolerance;
    });
  return { processes, computeMode: false, full: state.full };
}

/** Reads the selected GPUs once per `plan` (outside the shared poll). */
export async function readOnce(session: NvmlSession, state: WaitState, plan: ReadPlan): Promise<{ snapshot: Snapshot; receivedAtMs: number }> {
  const snapshot = await session.snapshot(snapshotOptionsFor(plan, state.selection.indices));
  return { snapshot, receivedAtMs: performance.now() };
}

/**
 * Selects the GPUs from the session's identities (no NVML call) when it has them; a selection
 * that needs MIG instances (a MIG UUID), or one that fails (its message lists every MIG
 * instance), is made again on a read of every field.
 */
async function selectGpus(options: WaitOptions, session: NvmlSession, env: NodeJS.ProcessEnv): Promise<{ selection: DeviceSelection; devices: readonly SelectableDevice[] }> {
  const identities = (session as Partial<NvmlMemoryReader>).devices;
  if (identities !== undefined) {
    try {
      return { selection: selectDevices(identities, options.gpus, env), devices: identities };
    } catch (error) {
      if (!(error instanceof DeviceSelectionError) && !(error instanceof NvmlError)) throw error;
    }
  }
  const devices = await deviceList(session);
  return { selection: selectDevices(devices, options.gpus, env), devices };
}

/** Resolves the criteria, selects the GPUs once and builds the holder-inspection context once. */
export async function prepareWait(options: WaitOptions, session: NvmlSession, startMs: number): Promise<WaitState> {
  const criteria = resolveCriteria(options);
  const env = options.env ?? process.env;
  const { selection, devices } = await selectGpus(options, session, env);
  if (selection.indices.length === 0 && options.allowEmptySelection !== true) throw emptySelectionError(selection, options.gpus, env);
  let inspectContext: (() => Promise<InspectContext>) | null = null;
  if (options.inspectHolders !== false) {
    const inspectOptions = typeof options.inspectHolders === 'object' ? options.inspectHolders : {};
    let prepared: Promise<InspectContext> | null = null;
    inspectContext = () => (prepared ??= prepareInspectContext(inspectOptions));
  }
  const units = unitsOf(selection, devices);
  return {
    selection,
    criteria,
    tracker: new StabilityTracker(criteria.stableToleranceBytes),
    inspectContext,
    startMs,
    polls: 0,
    units,
    full: units.some((unit) => unit.migUuid !== null),
    known: new Map(),
    computeModes: new Map(),
    last: null,
  };
}

/** The value as the error shows it: JSON where it has a JSON form (shortened), else its type. */
function describeValue(value: unknown): string {
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'bigint') return `${value}n`;
  if (value === null || typeof value !== 'object') return typeof value === 'string' ? JSON.stringify(value) : String(value);
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch {
    text = undefined;
  }
  if (text === undefined) return Array.isArray(value) ? 'an array' : 'an object';
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/** The first element of `list` that `ok` rejects, with its index. */
function firstBad(list: readonly unknown[], ok: (item: unknown) => boolean): { index: number; value: unknown } | null {
  const index = list.findIndex((item) => !ok(item));
  return index === -1 ? null : { index, value: list[index] };
}

const isIndexOrSelector = (item: unknown): boolean =>
  (typeof item === 'string' && item.trim() !== '') || (typeof item === 'number' && Number.isInteger(item) && item >= 0);

/** The duration options; each one at most MAX_DURATION_MS. */
const DURATION_OPTIONS = ['timeoutMs', 'intervalMs', 'stableMs', 'killGraceMs'] as const;

/**
 * Rejects a duration option longer than a timer can hold (Node would fire it after 1 ms: a
 * timeout of 1e20 ms would end the wait at once) with a ConfigError naming the option.
 */
export function checkDurationLimits(options: { [name in (typeof DURATION_OPTIONS)[number]]?: number | undefined }): void {
  for (const name of DURATION_OPTIONS) {
    const value = options[name];
    if (typeof value === 'number' && value > MAX_DURATION_MS) {
      throw new ConfigError(name, `option ${name} ${value} is too long: expected at most ${MAX_DURATION_MS} ms (${formatDuration(MAX_DURATION_MS)}), the longest delay a timer holds`);
    }
  }
}

/** Rejects option values of the wrong type with a TypeError naming the option and what it takes. */
export function checkOptions(options: WaitOptions): void {
  if (typeof options !== 'object' || options === null) {
    throw new TypeError(`waitForGpusFree(options): options must be an object like { gpus, minFree, timeoutMs }, got ${describeValue(options)}`);
  }
  for (const name of ['timeoutMs', 'intervalMs', 'stableMs', 'stableToleranceBytes', 'marginBytes', 'callTimeoutMs'] as const) {
    const value: unknown = options[name];
    if (value !== undefined && (typeof value !== 'number' || !Number.isFinite(value) || value < 0)) {
      throw new TypeError(`option ${name} must be a finite number >= 0, got ${describeValue(value)}`);
    }
  }
  if (options.gpus !== undefined) {
    const expected = 'NVML indices (integers >= 0, e.g. [0, 1]) or selector strings (indices, GPU-/MIG- UUIDs, PCI bus ids)';
    if (!Array.isArray(options.gpus)) throw new TypeError(`option gpus must be an array of ${expected}, got ${describeValue(options.gpus)}`);
    const bad = firstBad(options.gpus, isIndexOrSelector);
    if (bad !== null) throw new TypeError(`option gpus[${bad.index}] must be an NVML index (an integer >= 0) or a non-empty selector string, got ${describeValue(bad.value)}`);
  }
  if (options.ignore !== undefined) {
    if (!Array.isArray(options.ignore)) throw new TypeError(`option ignore must be an array of pids and process names, got ${describeValue(options.ignore)}`);
    const bad = firstBad(options.ignore, (i) => (typeof i === 'string' && i !== '') || (typeof i === 'number' && Number.isInteger(i) && i > 0));
    if (bad !== null) throw new TypeError(`option ignore[${bad.index}] must be a pid (an integer > 0) or a process name, got ${describeValue(bad.value)}`);
  }
  for (const name of ['minFree', 'maxUsed'] as const) {
    const value: unknown = options[name];
    const engine = name === 'minFree' ? ' (or an engine\'s own check: { engine: \'vllm\', utilization, contextBytes? })' : '';
    if (value !== undefined && (typeof value !== 'object' || value === null || !('fraction' in value || 'bytes' in value || (engine !== '' && 'engine' in value)))) {
      throw new TypeError(`option ${name} must be { fraction } or { bytes }, got ${describeValue(value)}${engine}`);
    }
  }
  if (options.signal !== undefined && !(options.signal instanceof AbortSignal)) {
    throw new TypeError(`option signal must be an AbortSignal, got ${describeValue(options.signal)}`);
  }
  if (options.allowEmptySelection !== undefined && typeof options.allowEmptySelection !== 'boolean') {
    throw new TypeError(`option allowEmptySelection must be a boolean, got ${describeValue(options.allowEmptySelection)}`);
  }
  if (options.onPoll !== undefined && typeof options.onPoll !== 'function') {
    throw new TypeError(`option onPoll must be a function, got ${describeValue(options.onPoll)}`);
  }
}

/**
 * Evaluates the first read of a wait or a check (taken by the caller, e.g. together with the stale
 * scan) as poll 1. `useStability` false for a one-sample check.
 */
export async function evaluateFirstRead(first: { snapshot: Snapshot; receivedAtMs: number }, state: WaitState, useStability: boolean): Promise<Evaluation> {
  const read = await evaluateRead(first.snapshot, confirmingPlan(state), first.receivedAtMs, state, useStability, state.polls + 1);
  if (read === null) throw new Error('internal error: the snapshot lacks a selected GPU');
  state.polls = read.evaluation.polls;
  state.last = read.evaluation;
  return read.evaluation;
}

/**
 * One sample of the selected GPUs against the criteria, without stability (for `gpugate check`).
 * Resolves with the evaluation whether or not the GPUs are free; rejects with ConfigError,
 * DeviceSelectionError or NvmlError.
 */
export async function checkGpusOnce(options: WaitOptions = {}): Promise<Evaluation> {
  const startMs = performance.now();
  checkOptions(options);
  checkDurationLimits(options);
  resolveCriteria(options);
  const { session, release } = await acquireSession(options);
  try {
    const state = await prepareWait(options, session, startMs);
    return await evaluateFirstRead(await readOnce(session, state, confirmingPlan(state)), state, false);
  } finally {
    await release();
  }
}

/** How {@link pollUntilFree} runs. */
export interface PollLoopOptions {
  intervalMs: number;
  timeoutMs?: number;
  signal?: AbortSignal;
  onPoll?: (evaluation: Evaluation) => void;
  /** The first read, taken by the caller: evaluated as poll 1 before the shared poll starts. */
  first?: { snapshot: Snapshot; receivedAtMs: number };
  /**
   * Decides whether an evaluation ends the loop (default: every selected GPU ok). Offered one
   * evaluation at a time, the newest when several arrived meanwhile; one in flight when the
   * timeout or the abort comes is still decided, and a true answer then wins.
   */
  accept?: (evaluation: Evaluation) => boolean | Promise<boolean>;
}

/**
 * The poll loop of a prepared wait: resolves once every selected GPU is free and stable, rejects
 * with GpuWaitTimeoutError after `timeoutMs` (counted from state.startMs), GpuWaitAbortError
 * when `signal` aborts, the NvmlError at once on a fatal NVML condition. Polls are shared with
 * every other waiter of the session at the same interval.
 */
export function pollUntilFree(session: NvmlSession, state: WaitState, options: PollLoopOptions): Promise<WaitResult> {
  const poller = SnapshotPoller.for(session, options.intervalMs);
  return new Promise<WaitResult>((resolve, reject) => {
    let settled = false;
    let busy = false;
    let pending: PollResult | null = null;
    let timer: NodeJS.Timeout | null = null;
    let unsubscribe: () => void = () => {};
    const accept = options.accept;
    let accepting = false;
    /** A timeout or abort that came while `accept` was deciding: settles once it declines. */
    let stopping: (() => void) | null = null;
    const stop = (settle: () => void): void => {
      if (accepting) stopping ??= settle;
      else finish(settle);
    };

    const onAbort = (): void => stop(() => reject(new GpuWaitAbortError(state.last, options.signal?.reason)));
    const finish = (settle: () => void): void => {
      if (settled) return;
      settled = true;
      unsubscribe();
      if (timer !== null) clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      settle();
    };
    const succeed = (evaluation: Evaluation): void =>
      finish(() => resolve({ elapsedMs: evaluation.elapsedMs, polls: evaluation.polls, devices: evaluation.devices, evaluation }));

    /** Evaluates one poll (confirming a "ready" that rests on carried-over fields); true when the wait is over. */
    const evaluate = async (result: Extract<PollResult, { kind: 'snapshot' }>): Promise<boolean> => {
      const polls = state.polls + 1;
      let read = await evaluateRead(result.snapshot, result.plan, result.receivedAtMs, state, true, polls);
      if (read === null || settled) return settled;
      state.polls = polls;
      if (needsConfirmation(read, accept !== undefined)) {
        const confirming = await poller.refine(state.selection.indices, confirmingPlan(state));
        if (settled) return true;
        if (confirming.kind === 'error') {
          const error = confirming.error;
          finish(() => reject(error));
          return true;
        }
        read = (await evaluateRead(confirming.snapshot, confirming.plan, confirming.receivedAtMs, state, true, polls)) ?? read;
        if (settled) return true;
      }
      state.last = read.evaluation;
      options.onPoll?.(read.evaluation);
      if (accept === undefined) {
        if (read.evaluation.ok) succeed(read.evaluation);
        return settled;
      }
      accepting = true;
      let accepted: boolean;
      try {
        accepted = await accept(read.evaluation);
      } finally {
        accepting = false;
      }
      if (accepted) succeed(read.evaluation);
      else if (stopping !== null) finish(stopping);
      return settled;
    };

    const drain = async (): Promise<void> => {
      busy = true;
      while (pending !== null && !settled) {
        const result: PollResult = pending;
        pending = null;
        if (result.kind === 'error') {
          const error = result.error;
          finish(() => reject(error));
          break;
        }
        try {
          if (await evaluate(result)) break;
        } catch (error) {
          finish(() => reject(error));
        }
      }
      busy = false;
    };

    options.signal?.addEventListener('abort', onAbort, { once: true });
    if (options.timeoutMs !== undefined) {
      const timeoutMs = options.timeoutMs;
      timer = setTimeout(() => stop(() => reject(new GpuWaitTimeoutError(timeoutMs, state.last))), Math.max(0, timeoutMs - (performance.now() - state.startMs)));
    }
    if (state.units.length === 0) {
      // Nothing selected, and the caller said that is acceptable (allowEmptySelection).
      const evaluation: Evaluation = { elapsedMs: performance.now() - state.startMs, polls: 0, ok: true, devices: [], snapshot: { takenAt: Date.now(), devices: [] }, selection: state.selection };
      succeed(evaluation);
      return;
    }
    if (options.signal?.aborted) {
      onAbort();
      return;
    }
    const subscribe = (firstDelayMs: number): void => {
      if (settled) return;
      unsubscribe = poller.subscribe(
        state.selection.indices,
        (result) => {
          pending = result;
          if (!busy) void drain();
        },
        () => nextReadPlan(state, { intervalMs: options.intervalMs, partial: accept !== undefined }),
        firstDelayMs,
      );
    };
    const first = options.first;
    if (first === undefined) {
      subscribe(0);
      return;
    }
    busy = true;
    evaluate({ kind: 'snapshot', snapshot: first.snapshot, plan: confirmingPlan(state), receivedAtMs: first.receivedAtMs, sequence: 0 })
      .then(
        (over) => {
          busy = false;
          if (!over) subscribe(Math.max(0, options.intervalMs - (performance.now() - first.receivedAtMs)));
        },
        (error: unknown) => {
          busy = false;
          finish(() => reject(error));
        },
      );
  });
}

/**
 * Waits until every selected GPU meets the criteria and its free memory has been stable for
 * stableMs. Resolves with { elapsedMs, polls, devices, evaluation }. Rejects with
 * GpuWaitTimeoutError after timeoutMs, GpuWaitAbortError (name 'AbortError') when `signal`
 * aborts, the NvmlError at once on a fatal NVML condition, ConfigError for impossible criteria or a duration above MAX_DURATION_MS,
 * DeviceSelectionError when a selector matches nothing. Many waiters on one session share one
 * poll per interval; a poll reads memory, and process lists and the compute mode only where the
 * decision needs them.
 */
export async function waitForGpusFree(options: WaitOptions = {}): Promise<WaitResult> {
  const startMs = performance.now();
  checkOptions(options);
  checkDurationLimits(options);
  resolveCriteria(options);
  if (options.signal?.aborted) throw new GpuWaitAbortError(null, options.signal.reason);
  const { session, release } = await acquireSession(options);
  try {
    const state = await prepareWait(options, session, startMs);
    return await pollUntilFree(session, state, {
      intervalMs: options.intervalMs ?? DEFAULT_INTERVAL_MS,
      ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
      ...(options.signal !== undefined ? { signal: options.signal } : {}),
      ...(options.onPoll !== undefined ? { onPoll: options.onPoll } : {}),
    });
  } finally {
    await release();
  }
}
