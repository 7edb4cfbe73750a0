/**
 * Hand-made GpuDevice / Snapshot values for the policy tests that feed the TypeScript layer a
 * snapshot directly (holder classification, reaping, waiting, device selection). Every field a
 * device carries gets a plain, healthy default; a test names only the fields it is about.
 */
import type { GpuDevice, GpuMemory, GpuProcess, Snapshot } from '../../src/types';

export const GiB = 1024 ** 3;

/** The memory size of a fake device unless a test gives another. */
export const FAKE_TOTAL_BYTES = 96 * GiB;

/** A process as the policy tests list it: its pid and its memory (null: NVML gave no figure). */
export interface FakeProcess {
  pid: number;
  usedBytes: number | null;
}

/** NVML v2 memory figures: `usedBytes` in use out of `totalBytes`, nothing reserved. */
export function fakeMemory(usedBytes: number, totalBytes: number = FAKE_TOTAL_BYTES): GpuMemory {
  return { totalBytes, usedBytes, freeBytes: totalBytes - usedBytes, reservedBytes: 0, source: 'v2' };
}

/** Compute processes outside any MIG instance, in the order given. */
export function fakeProcesses(processes: FakeProcess[]): GpuProcess[] {
  return processes.map((p) => ({ pid: p.pid, usedBytes: p.usedBytes, kinds: ['compute'], gpuInstanceId: null, computeInstanceId: null }));
}

/**
 * A healthy device: index 0 unless `overrides.index` says otherwise, identity (UUID, PCI bus id,
 * minor number) derived from the index, no memory in use, no processes, no errors. `overrides`
 * replace whole fields.
 */
export function fakeDevice(overrides: Partial<GpuDevice> = {}): GpuDevice {
  const index = overrides.index ?? 0;
  return {
    index,
    uuid: `GPU-${index.toString(16).padStart(8, '0')}-aaaa-bbbb-cccc-dddddddddddd`,
    name: 'Fake GPU',
    pciBusId: `00000000:${(0x1b + index).toString(16).toUpperCase()}:00.0`,
    minorNumber: index,
    computeCapability: '12.0',
    recoveryAction: 'none',
    memory: fakeMemory(0),
    processes: [],
    persistenceMode: true,
    computeMode: 'default',
    migMode: false,
    utilization: null,
    temperatureC: null,
    powerWatts: null,
    error: null,
    fieldErrors: {},
    ...overrides,
  };
}

/** A snapshot of `devices`, taken now unless `takenAt` (epoch ms) is given. */
export function fakeSnapshot(devices: GpuDevice[], takenAt: number = Date.now()): Snapshot {
  return { takenAt, devices };
}
