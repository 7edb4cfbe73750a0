/**
 * selectGpus: choose N GPUs for a job. A GPU is eligible when it meets the same criteria as
 * `check` (with `wait`, also stability, as `wait` judges it), has no stale holder, and is not
 * leased to a live process; among the eligible ones the nearest N on the PCI tree are taken
 * (see placement.ts) and leased (see host/gpu-lease.ts) in one decision under the lease lock,
 * so concurrent selectors never hand out the same GPU. A lease on a MIG instance covers its
 * whole GPU and the reverse, since both name the same silicon. gate() evaluates; that decision
 * is its `accept`, so a wait goes on polling while too few GPUs are eligible or unleased.
 */
import { monotonicMs } from '../monotonic-clock';
import { ConfigError } from '../config-error';
import { DEFAULT_LEASE_DIR, DEFAULT_LEASE_LOCK_TIMEOUT_MS, LEASE_DIR_ENV, LeaseDirectory, type LeaseRecord, type LeaseRelease, type LeaseState, type LeaseStatus, type OwnLease } from '../host/gpu-lease';
import { DEFAULT_SYSFS_ROOT, SYSFS_ROOT_ENV, readPciPlacement, type PciPlacement } from '../host/pci-topology';
import { formatDuration } from '../units';
import { gate, type GateOptions } from './gate';
import { DEFAULT_TIMEOUT_MS } from './gate-defaults';
import { chooseNearest } from './placement';
import { isStaleHolder } from './stale-holders';
import { GpuWaitAbortError, type Evaluation, type GpuEvaluation, type GpuFailureReason, type WaitOptions } from './wait';
import { checkedWhereUsed, checkOptionKeys, type OptionTable } from '../option-keys';
import { WAIT_OPTION_CHECKS } from './option-check';

/** Options of selectGpus: the criteria and selection of waitForGpusFree, plus how many and how to lease. */
export interface SelectOptions extends Omit<WaitOptions, 'allowEmptySelection'> {
  /** How many GPUs to choose (an integer >= 1). */
  count: number;
  /** Poll (with stability, as gate() waits, until timeoutMs, default DEFAULT_TIMEOUT_MS) until `count` are eligible; default false: one sample, as gate() checks. */
  wait?: boolean;
  /** Take a lease on each chosen GPU (default true); false only reports what would be chosen now (others' leases still count). */
  lease?: boolean;
  /** Lease directory; default GPUGATE_LEASE_DIR, else /run/gpugate/leases. */
  leaseDir?: string;
  /** The process the GPUs are for: the lease ends when it exits. Default the calling process, or none when leaseDurationMs is given (the `gpugate select` command passes its parent); null: only leaseDurationMs bounds the lease. */
  leaseHolderPid?: number | null;
  /** The lease also ends this long after it is taken; default null (only when the holder exits). */
  leaseDurationMs?: number | null;
  /** How long to wait for another selector's decision (default 10 000 ms). */
  leaseLockTimeoutMs?: number;
  /** The sysfs root the PCI topology is read from; default GPUGATE_SYSFS_ROOT, else /sys. */
  sysfsRoot?: string;
}

/** Why a GPU was not chosen: an evaluation reason, a stale holder on it, or a live lease. */
export type SelectExclusion = GpuFailureReason | 'stale-holder' | 'leased';

/** One GPU the selector considered. */
export interface SelectCandidate {
  index: number;
  /** The GPU's UUID (the MIG instance's for a MIG selection). */
  uuid: string;
  /** For a MIG instance, its whole GPU's UUID; null for a whole GPU. */
  parentUuid: string | null;
  /** Null (as name) when NVML could not report it. */
  pciBusId: string | null;
  name: string | null;
  /** Meets the criteria, no stale holder, not leased. */
  eligible: boolean;
  /** Why it is not eligible (empty when it is). */
  exclusions: SelectExclusion[];
  /** Where it sits on the PCI tree; null when sysfs does not say. */
  placement: PciPlacement | null;
  /** Its lease file as judged before the decision (null when leases are off, or not looked at because the GPU is not free). */
  lease: { state: LeaseState; reason: string; holderPid: number | null; expiresAt: number | null } | null;
}

/** A chosen GPU. */
export interface SelectedGpu {
  index: number;
  uuid: string;
  pciBusId: string | null;
  name: string | null;
  numaNode: number | null;
  /** The lease taken on it (null with lease: false). */
  lease: LeaseRecord | null;
  /** The lease file (null with lease: false). */
  leasePath: string | null;
}

/** What selectGpus found. */
export interface SelectResult {
  /** selected: `gpus` holds `count` GPUs (leased); busy: fewer were eligible in the one sample; timeout: fewer were eligible until timeoutMs. */
  result: 'selected' | 'busy' | 'timeout';
  count: number;
  /** The chosen GPUs in NVML index order (empty unless selected). */
  gpus: SelectedGpu[];
  /** Every GPU considered at the deciding (or last) evaluation. */
  candidates: SelectCandidate[];
  /** The chosen GPUs as CUDA_VISIBLE_DEVICES takes them (UUIDs, comma separated, as `gpugate select` prints); null unless selected. */
  cudaVisibleDevices: string | null;
  /**
   * Gives the GPUs back before the lease would end by itself: removes the lease files this call
   * wrote (each only while it is still the file and record written; never another holder's).
   * Harmless to call again, or when nothing was leased. Rejects with UnsafePathError or
   * FileSystemError when the lease directory cannot be used safely, removing nothing.
   */
  release(): Promise<LeaseRelease[]>;
  /** One line: what was chosen, or why not. */
  reason: string;
  /** What the caller should be told about the leases taken (e.g. the host cannot check their holder); empty when nothing. */
  warnings: string[];
  /** The deciding (or last) evaluation; null when none completed before the timeout. */
  evaluation: Evaluation | null;
  elapsedMs: number;
  polls: number;
}

/** The value of CUDA_VISIBLE_DEVICES that names these GPUs: their UUIDs, which mean the same GPU whatever CUDA_DEVICE_ORDER is. */
export function cudaVisibleDevicesOf(gpus: ReadonlyArray<Pick<SelectedGpu, 'uuid'>>): string {
  return gpus.map((gpu) => gpu.uuid).join(',');
}

function describe(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value) : String(value);
}

/** selectGpus's keys: a wait's (checked as gate() checks them), and its own (checked below). */
const { allowEmptySelection: _notSelectable, ...SELECT_CRITERIA_CHECKS } = WAIT_OPTION_CHECKS;
const SELECT_OPTION_CHECKS: OptionTable<SelectOptions> = {
  ...SELECT_CRITERIA_CHECKS,
  count: checkedWhereUsed,
  wait: checkedWhereUsed,
  lease: checkedWhereUsed,
  leaseDir: checkedWhereUsed,
  leaseHolderPid: checkedWhereUsed,
  leaseDurationMs: checkedWhereUsed,
  leaseLockTimeoutMs: checkedWhereUsed,
  sysfsRoot: checkedWhereUsed,
};

function checkSelectOptions(options: SelectOptions): void {
  checkOptionKeys<SelectOptions>('selectGpus(options)', options, SELECT_OPTION_CHECKS, '{ count: 2 }');
  const { count, leaseHolderPid, leaseDurationMs, leaseLockTimeoutMs } = options;
  if (typeof count !== 'number' || !Number.isSafeInteger(count) || count < 1) throw new ConfigError('count', `option count must be an integer >= 1, got ${describe(count)}`);
  if (leaseHolderPid !== undefined && leaseHolderPid !== null && (!Number.isSafeInteger(leaseHolderPid) || leaseHolderPid < 1)) {
    throw new ConfigError('leaseHolderPid', `option leaseHolderPid must be a pid (an integer >= 1) or null, got ${describe(leaseHolderPid)}`);
  }
  if (leaseDurationMs !== undefined && leaseDurationMs !== null && (typeof leaseDurationMs !== 'number' || !Number.isFinite(leaseDurationMs) || leaseDurationMs <= 0)) {
    throw new ConfigError('leaseDurationMs', `option leaseDurationMs must be a number of milliseconds above 0 or null, got ${describe(leaseDurationMs)}`);
  }
  if (leaseHolderPid === null && (leaseDurationMs ?? null) === null && options.lease !== false) {
    throw new ConfigError('leaseHolderPid', 'a lease needs a holder (leaseHolderPid) or a duration (leaseDurationMs): with neither it could never end');
  }
  if (leaseLockTimeoutMs !== undefined && (typeof leaseLockTimeoutMs !== 'number' || !Number.isFinite(leaseLockTimeoutMs) || leaseLockTimeoutMs < 0)) {
    throw new ConfigError('leaseLockTimeoutMs', `option leaseLockTimeoutMs must be a finite number >= 0, got ${describe(leaseLockTimeoutMs)}`);
  }
  for (const name of ['wait', 'lease'] as const) {
    if (options[name] !== undefined && typeof options[name] !== 'boolean') throw new ConfigError(name, `option ${name} must be a boolean, got ${describe(options[name])}`);
  }
}

function exclusionsOf(gpu: GpuEvaluation): SelectExclusion[] {
  const exclusions: SelectExclusion[] = [...gpu.reasons];
  if (gpu.holders.some(isStaleHolder)) exclusions.push('stale-holder');
  return exclusions;
}

function leaseSummary(status: LeaseStatus): NonNullable<SelectCandidate['lease']> {
  return { state: status.state, reason: status.reason, holderPid: status.record?.holderPid ?? null, expiresAt: status.record?.expiresAt ?? null };
}

/** Whether a lease file keeps its GPU from being handed out: a live lease, or something that is not a lease (never touched). */
function blocks(status: LeaseStatus): boolean {
  return status.state === 'held' || status.state === 'foreign';
}

/**
 * The lease that keeps `candidate` from being handed out, judged now: its own, else one on the
 * same silicon (a MIG instance's whole GPU, or any MIG instance of a whole GPU); null when none.
 * Also returns its own lease file's status, which a pick replaces when stale.
 */
function judgeLeases(leases: LeaseDirectory, candidate: SelectCandidate): { own: LeaseStatus; blocking: LeaseStatus | null; summary: NonNullable<SelectCandidate['lease']> } {
  const own = leases.inspect(candidate.uuid);
  if (blocks(own)) return { own, blocking: own, summary: leaseSummary(own) };
  const covering = candidate.parentUuid !== null ? [leases.inspect(candidate.parentUuid)] : leases.leasesWithin(candidate.uuid);
  const blocking = covering.find(blocks) ?? null;
  if (blocking === null) return { own, blocking: null, summary: leaseSummary(own) };
  const where = candidate.parentUuid !== null ? `its whole GPU ${blocking.uuid}` : `its MIG instance ${blocking.uuid}`;
  return { own, blocking, summary: { ...leaseSummary(blocking), state: 'held', reason: `covered by the lease on ${where}: ${blocking.reason}` } };
}

function exclusionText(candidate: SelectCandidate): string {
  return candidate.exclusions
    .map((exclusion) => {
      if (exclusion !== 'leased' || candidate.lease === null) return exclusion;
      return candidate.lease.state === 'foreign' ? `a file in the lease's place (${candidate.lease.reason})` : candidate.lease.reason;
    })
    .join(', ');
}

function shortfall(candidates: readonly SelectCandidate[], count: number): string {
  const eligible = candidates.filter((c) => c.eligible).length;
  const others = candidates.filter((c) => !c.eligible).map((c) => `GPU ${c.index} (${c.uuid}): ${exclusionText(c)}`);
  return `${eligible} of ${candidates.length} GPUs eligible, ${count} needed${others.length > 0 ? `: ${others.join('; ')}` : ''}`;
}

/**
 * Chooses `count` GPUs that meet the criteria (as gate() judges them in a check, or with `wait`
 * in a wait, stability included), carry no stale holder and are not leased to a live
 * process; prefers GPUs behind one PCIe switch, then one host bridge, then one NUMA node; leases
 * them (unless `lease: false`). Resolves with result 'selected', or 'busy' / 'timeout' when too
 * few were eligible. Rejects with ConfigError when the selection holds fewer than `count` GPUs,
 * DeviceSelectionError, NvmlError, GpuLeaseError (the lock held too long, a holder that is gone),
 * UnsafePathError or FileSystemError (the lease directory unsafe or failing), a ConfigError for
 * bad options, and GpuWaitAbortError (name 'AbortError') when `signal` aborts.
 */
export async function selectGpus(options: SelectOptions): Promise<SelectResult> {
  const startMs = monotonicMs();
  checkSelectOptions(options);
  const env = options.env ?? process.env;
  const count = options.count;
  const leasing = options.lease !== false;
  const leases = new LeaseDirectory(options.leaseDir ?? (env[LEASE_DIR_ENV] || DEFAULT_LEASE_DIR));
  const durationMs = options.leaseDurationMs ?? null;
  // A duration alone bounds the lease unless a holder is named: binding it to a caller that may exit at once would end it early.
  const terms = { holderPid: options.leaseHolderPid === undefined ? (durationMs === null ? process.pid : null) : options.leaseHolderPid, durationMs };
  const sysfsRoot = options.sysfsRoot ?? (env[SYSFS_ROOT_ENV] || DEFAULT_SYSFS_ROOT);
  const placements = new Map<string, PciPlacement | null>();
  const placementOf = (busId: string): PciPlacement | null => {
    if (!placements.has(busId)) placements.set(busId, readPciPlacement(busId, sysfsRoot));
    return placements.get(busId) ?? null;
  };
  let candidates: SelectCandidate[] = [];
  let chosen: SelectedGpu[] = [];
  let warnings: string[] = [];
  let own: OwnLease[] = [];

  /** Judges every free candidate's leases (others' leases count with `lease: false` too), excluding those leased; returns each one's own lease file. */
  const excludeLeased = (free: readonly SelectCandidate[]): Map<SelectCandidate, LeaseStatus> => {
    const statuses = new Map<SelectCandidate, LeaseStatus>();
    for (const candidate of free) {
      const { own, blocking, summary } = judgeLeases(leases, candidate);
      statuses.set(candidate, own);
      candidate.lease = summary;
      if (blocking !== null) {
        candidate.eligible = false;
        candidate.exclusions.push('leased');
      }
    }
    return statuses;
  };

  const accept = async (evaluation: Evaluation): Promise<boolean> => {
    if (evaluation.devices.length < count) {
      throw new ConfigError('count', `${count} GPUs requested but the selection (${evaluation.selection.source}) holds only ${evaluation.devices.length}: that can never be met`);
    }
    // A GPU without a UUID can be neither leased nor named in CUDA_VISIBLE_DEVICES: never a candidate.
    const considered = evaluation.devices.flatMap((gpu): SelectCandidate[] => {
      if (gpu.uuid === null) return [];
      const exclusions = exclusionsOf(gpu);
      const parentUuid = gpu.migUuid === null ? null : evaluation.snapshot.devices.find((device) => device.index === gpu.index)?.uuid ?? null;
      return [{ index: gpu.index, uuid: gpu.uuid, parentUuid, pciBusId: gpu.pciBusId, name: gpu.name, eligible: exclusions.length === 0, exclusions, placement: gpu.pciBusId === null ? null : placementOf(gpu.pciBusId), lease: null }];
    });
    candidates = considered;
    const free = considered.filter((c) => c.eligible);
    if (free.length < count) return false;
    if (!leasing) {
      // What would be chosen now: read without the lock (nothing is written), and others' leases still count.
      excludeLeased(free);
      const available = free.filter((c) => c.eligible);
      if (available.length < count) return false;
      chosen = chooseNearest(available, count).map((c) => ({ index: c.index, uuid: c.uuid, pciBusId: c.pciBusId, name: c.name, numaNode: c.placement?.numaNode ?? null, lease: null, leasePath: null }));
      return true;
    }
    return leases.withLock(() => {
      const statuses = excludeLeased(free);
      const available = free.filter((c) => c.eligible);
      if (available.length < count) return false;
      const picked = chooseNearest(available, count);
      const createdAt = Date.now();
      // Every record first (the holder is read from /proc here), so a failure leaves nothing half-leased.
      const made = picked.map((candidate) => leases.recordFor(candidate.uuid, candidate.parentUuid, terms, createdAt));
      const records = made.map((lease) => lease.record);
      const written: LeaseStatus[] = [];
      const writtenLeases: OwnLease[] = [];
      const giveBack = (): void => {
        for (const mine of written) leases.removeStale({ ...mine, state: 'stale' });
      };
      const taken: SelectedGpu[] = [];
      try {
        for (const [at, candidate] of picked.entries()) {
          const status = statuses.get(candidate)!;
          const record = records[at]!;
          if ((status.state === 'stale' && !leases.removeStale(status)) || !leases.write(record)) {
            // Someone outside gpugate's lock put a file there: give back what this attempt took.
            giveBack();
            candidate.eligible = false;
            candidate.exclusions.push('leased');
            return false;
          }
          const mine = leases.inspect(candidate.uuid);
          written.push(mine);
          if (mine.identity !== null) writtenLeases.push({ record, identity: mine.identity });
          taken.push({ index: candidate.index, uuid: candidate.uuid, pciBusId: candidate.pciBusId, name: candidate.name, numaNode: candidate.placement?.numaNode ?? null, lease: record, leasePath: status.path });
        }
      } catch (error) {
        giveBack();
        throw error;
      }
      chosen = taken;
      own = writtenLeases;
      warnings = [...new Set(made.flatMap((lease) => (lease.warning === null ? [] : [lease.warning])))];
      return true;
    }, options.leaseLockTimeoutMs ?? DEFAULT_LEASE_LOCK_TIMEOUT_MS);
  };

  const { count: _count, wait, lease: _lease, leaseDir: _leaseDir, leaseHolderPid: _holder, leaseDurationMs: _duration, leaseLockTimeoutMs: _lockTimeout, sysfsRoot: _sysfs, ...criteria } = options;
  // gate() evaluates (criteria, holder classes, stability); `accept` decides when enough GPUs are eligible and leased.
  const gateOptions: GateOptions = { ...criteria, mode: wait === true ? 'wait' : 'check', stale: 'ignore', inspectHolders: options.inspectHolders ?? true, accept };
  const end = await gate(gateOptions);
  if (end.result === 'interrupted') throw new GpuWaitAbortError(end.evaluation, options.signal?.reason);
  if (end.result !== 'ready' && end.result !== 'busy' && end.result !== 'timeout') throw end.error ?? new Error(end.reason);
  const elapsedMs = monotonicMs() - startMs;
  const polls = end.polls;
  const lockTimeoutMs = options.leaseLockTimeoutMs ?? DEFAULT_LEASE_LOCK_TIMEOUT_MS;
  const release = (): Promise<LeaseRelease[]> => leases.release(end.result === 'ready' ? own : [], lockTimeoutMs);
  if (end.result === 'ready') {
    const holder = terms.holderPid === null ? '' : ` to pid ${terms.holderPid}${chosen[0]?.lease?.holderComm ? ` (${chosen[0].lease.holderComm})` : ''}`;
    const until = terms.durationMs === null ? '' : ` for ${formatDuration(terms.durationMs)}`;
    const leased = leasing ? `, leased${holder}${until}` : ', not leased';
    return { result: 'selected', count, gpus: chosen, candidates, cudaVisibleDevices: cudaVisibleDevicesOf(chosen), release, reason: `GPUs ${chosen.map((gpu) => gpu.index).join(',')} selected${leased}`, warnings, evaluation: end.evaluation, elapsedMs, polls };
  }
  if (end.result === 'timeout') {
    const detail = end.evaluation === null ? 'no poll completed' : shortfall(candidates, count);
    return { result: 'timeout', count, gpus: [], candidates, cudaVisibleDevices: null, release, reason: `not enough GPUs after ${formatDuration(options.timeoutMs ?? DEFAULT_TIMEOUT_MS)}: ${detail}`, warnings: [], evaluation: end.evaluation, elapsedMs, polls };
  }
  return { result: 'busy', count, gpus: [], candidates, cudaVisibleDevices: null, release, reason: `not enough GPUs free: ${shortfall(candidates, count)}`, warnings: [], evaluation: end.evaluation, elapsedMs, polls };
}
