/**
 * Hand-made wait evaluations for the renderer tests (progress lines, STATUS= text, failure
 * texts): every field of the library's own types gets a plain default; a test names only the
 * fields it is about.
 */
import type { Holder } from '../../src/gate/stale';
import type { Evaluation, GpuEvaluation } from '../../src/gate/wait';

/** A holder: an active process of this pid unless `overrides` say otherwise. */
export function fakeHolder(overrides: Partial<Holder> & Pick<Holder, 'pid'>): Holder {
  return {
    class: 'active',
    gpus: [],
    usedBytes: null,
    usedBytesPerGpu: [],
    comm: null,
    cmdline: null,
    state: null,
    ppid: null,
    cgroup: null,
    unit: null,
    startTime: null,
    owner: null,
    reason: '',
    ...overrides,
  };
}

/** A GPU that meets every criterion unless `overrides` say otherwise. */
export function fakeGpuEvaluation(overrides: Partial<GpuEvaluation> & Pick<GpuEvaluation, 'index' | 'uuid' | 'pciBusId'>): GpuEvaluation {
  return {
    name: 'Fake GPU',
    migUuid: null,
    computeMode: 'default',
    memory: null,
    reservedInUsed: null,
    neededFreeBytes: null,
    engineView: null,
    maxUsedBytes: null,
    stableForMs: 0,
    settled: false,
    ok: true,
    reasons: [],
    holders: [],
    holdersUnknown: null,
    ignoredPids: [],
    unattributedBytes: null,
    error: null,
    ...overrides,
  };
}

/** One poll of `devices` at `elapsedMs`. */
export function fakeEvaluation(elapsedMs: number, devices: GpuEvaluation[], polls = 1): Evaluation {
  return {
    elapsedMs,
    polls,
    ok: devices.every((gpu) => gpu.ok),
    devices,
    snapshot: { takenAt: 0, devices: [] },
    selection: { indices: devices.map((gpu) => gpu.index), migUuids: [], source: 'all', warnings: [] },
  };
}
