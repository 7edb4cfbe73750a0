import { afterEach, describe, expect, it } from 'vitest';
import type { GpuProcess } from '../../src/types';
import { bundledScenario, freshSimulator, GiB, useScenario } from '../helpers/session-helpers';
import { closeTrackedSessions, openTrackedSession } from '../helpers/tracked-sessions';

afterEach(closeTrackedSessions);

function processes(count: number, firstPid: number, eachBytes: number) {
  return Array.from({ length: count }, (_, i) => ({
    pid: firstPid + i,
    usedBytes: eachBytes,
    kinds: i % 3 === 2 ? ['compute', 'graphics'] : ['compute'],
    name: `worker-${i}`,
  }));
}

/** Two busy GPUs, with `stride` bytes per entry from the _v3 process calls (32: a driver 535.54 host). */
function busyPair(stride: 24 | 32) {
  const scenario = bundledScenario('idle-8x-rtx-pro-6000.json');
  if (stride === 32) scenario['system'] = { driverVersion: '535.54.03', nvmlVersion: '12.535.54.03', cudaDriverVersion: 12020 };
  scenario.devices = scenario.devices.slice(0, 2);
  for (const device of scenario.devices) {
    device['memory'] = { totalBytes: 102641958912, reservedBytes: 493879296, usedBytes: 40 * GiB };
  }
  scenario.devices[0]!['processes'] = processes(5, 1000, 8 * GiB);
  scenario.devices[1]!['processes'] = [
    { pid: 2000, usedBytes: 39 * GiB, kinds: ['compute'], name: 'vllm' },
    { pid: 2001, usedBytes: null, kinds: ['compute', 'mps'], name: 'mps' },
  ];
  return scenario;
}

const expectedDevice0: GpuProcess[] = Array.from({ length: 5 }, (_, i) => ({
  pid: 1000 + i,
  usedBytes: 8 * GiB,
  kinds: i % 3 === 2 ? ['compute', 'graphics'] : ['compute'],
  gpuInstanceId: null,
  computeInstanceId: null,
}));

describe('process lists across symbol variants and strides', () => {
  it('reads 24-byte _v3 entries', async () => {
    useScenario(busyPair(24));
    const snap = await (await openTrackedSession(freshSimulator())).snapshot({ processes: true });
    expect(snap.devices[0]?.processes).toEqual(expectedDevice0);
    expect(snap.devices[0]?.processListSource).toEqual({
      symbol: 'nvmlDeviceGetComputeRunningProcesses_v3',
      strideBytes: 24,
    });
  });

  it('detects the R535 32-byte stride from _v3 and gives the identical list', async () => {
    useScenario(busyPair(24));
    const reference = await (await openTrackedSession(freshSimulator())).snapshot({ processes: true });
    useScenario(busyPair(32));
    const quirky = await (await openTrackedSession(freshSimulator('gpugate_sim_r535_early'))).snapshot({ processes: true });
    expect(quirky.devices[0]?.processListSource?.strideBytes).toBe(32);
    expect(quirky.devices[1]?.processListSource?.strideBytes).toBe(32);
    expect(quirky.devices.map((d) => d.processes)).toEqual(reference.devices.map((d) => d.processes));
    expect(quirky.devices[1]?.processes).toEqual([
      { pid: 2000, usedBytes: 39 * GiB, kinds: ['compute'], gpuInstanceId: null, computeInstanceId: null },
      { pid: 2001, usedBytes: null, kinds: ['compute', 'mps'], gpuInstanceId: null, computeInstanceId: null },
    ]);
  });

  it('falls back to the plain symbols (16-byte entries, v1 memory) on an old driver', async () => {
    useScenario(busyPair(24));
    const reference = await (await openTrackedSession(freshSimulator())).snapshot({ processes: true });
    // The legacy build serves a driver that old (before R470): NVML 5.319's _v2 init, count and
    // handles, but only the plain process lists and memory, and no MPS list (first in R470).
    useScenario({ ...busyPair(24), system: { driverVersion: '410.129', nvmlVersion: '10.410.129', cudaDriverVersion: 10000 } });
    const s = await openTrackedSession(freshSimulator('gpugate_sim_legacy'));
    expect(s.library.variants['init']).toBe('nvmlInit_v2');
    expect(s.library.variants['deviceGetComputeRunningProcesses']).toBe('nvmlDeviceGetComputeRunningProcesses');
    expect(s.library.variants['deviceGetMemoryInfo']).toBe('nvmlDeviceGetMemoryInfo');
    const legacy = await s.snapshot({ processes: true });
    expect(legacy.devices[0]?.processListSource).toEqual({
      symbol: 'nvmlDeviceGetComputeRunningProcesses',
      strideBytes: 16,
    });
    const withoutMps = reference.devices.map((d) => d.processes?.map((p) => ({ ...p, kinds: p.kinds.filter((k) => k !== 'mps') })));
    expect(legacy.devices.map((d) => d.processes)).toEqual(withoutMps);
    // v1 memory: used includes reserved, and reserved is unknown.
    expect(legacy.devices[0]?.memory).toEqual({
      totalBytes: 102641958912,
      freeBytes: 102641958912 - 493879296 - 40 * GiB,
      usedBytes: 40 * GiB + 493879296,
      reservedBytes: null,
      source: 'v1',
    });
    // Identity still complete through the older PCI and handle symbols.
    expect(legacy.devices[1]?.pciBusId).toBe(reference.devices[1]?.pciBusId);
    expect(legacy.devices[1]?.uuid).toBe(reference.devices[1]?.uuid);
  });

  it('retries the fill when the list grows between the size call and the fill call', async () => {
    const scenario = busyPair(24);
    // After the first compute-list call (the size call for GPU 0) the list jumps from 5 to 40
    // entries: more than the fill's headroom, so the first fill answers INSUFFICIENT_SIZE.
    scenario['timeline'] = [
      {
        atCall: 1,
        function: 'nvmlDeviceGetComputeRunningProcesses_v3',
        device: 0,
        set: { processes: processes(40, 3000, 1 * GiB) },
      },
    ];
    useScenario(scenario);
    const snap = await (await openTrackedSession(freshSimulator())).snapshot({ processes: true });
    const list = snap.devices[0]?.processes ?? [];
    expect(list).toHaveLength(40);
    expect(list.map((p) => p.pid)).toEqual(Array.from({ length: 40 }, (_, i) => 3000 + i));
    expect(snap.devices[0]?.fieldErrors).toEqual({});
  });

  it('lists MIG devices under their parent, skipping the hole, with their own processes', async () => {
    useScenario(bundledScenario('mig.json'));
    const snap = await (await openTrackedSession(freshSimulator())).snapshot({ processes: true });
    const parent = snap.devices[0];
    expect(parent?.migMode).toBe(true);
    expect(parent?.migDevices?.map((m) => m.index)).toEqual([0, 1, 3]);
    const first = parent?.migDevices?.[0];
    expect(first?.uuid).toBe('MIG-4a1c7e92-3b5d-5f08-9c2e-6d1a8b4f7e30');
    expect(first?.gpuInstanceId).toBe(3);
    expect(first?.computeInstanceId).toBe(0);
    expect(first?.memory?.totalBytes).toBe(25098715136);
    expect(first?.memory?.usedBytes).toBe(22011707392);
    expect(first?.error).toBeNull();
    expect(first?.processes?.map((p) => [p.pid, p.usedBytes])).toEqual([[51007, 21474836480]]);
    expect(parent?.migDevices?.[1]?.processes).toEqual([]);
    expect(snap.devices[1]?.migMode).toBe(false);
    expect(snap.devices[1]).not.toHaveProperty('migDevices');
  });
});
