import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config-error';
import { openNvml } from '../../src/nvml/session';
import { bundledScenario, freshSimulator, GiB, tempDir, useScenario } from '../helpers/session-helpers';
import { closeTrackedSessions, openTrackedSession } from '../helpers/tracked-sessions';

afterEach(closeTrackedSessions);

/** The bundled 8-GPU host with a vLLM-like load on GPUs 0 and 3 and distinct modes on GPU 7. */
function busyHost() {
  const scenario = bundledScenario('idle-8x-rtx-pro-6000.json');
  const d0 = scenario.devices[0]!;
  d0['memory'] = { totalBytes: 102641958912, reservedBytes: 493879296, usedBytes: 90 * GiB };
  d0['processes'] = [
    { pid: 4242, usedBytes: 60 * GiB, kinds: ['compute'], name: 'VLLM::Worker_TP0' },
    { pid: 4243, usedBytes: 30 * GiB, kinds: ['compute', 'graphics'], name: 'python3' },
    { pid: 4244, usedBytes: null, kinds: ['mps'], name: 'nvidia-cuda-mps-server' },
  ];
  d0['utilization'] = { gpu: 97, memory: 41 };
  const d3 = scenario.devices[3]!;
  d3['memory'] = { totalBytes: 102641958912, reservedBytes: 493879296, usedBytes: 2 * GiB };
  d3['processes'] = [{ pid: 777, usedBytes: 2 * GiB, kinds: ['graphics'], name: 'Xorg' }];
  const d7 = scenario.devices[7]!;
  d7['persistenceMode'] = false;
  d7['computeMode'] = 'exclusive_process';
  return scenario;
}

describe('snapshot of the 8-GPU reference host through the real addon and simulator', () => {
  it('reports the library, its versions and the newest symbol variants', async () => {
    useScenario(busyHost());
    const lib = freshSimulator();
    const s = await openTrackedSession(lib);
    expect(s.library.path).toBe(lib);
    expect(s.library.driverVersion).toBe('580.95.05');
    expect(s.library.nvmlVersion).toBe('13.580.95.05');
    expect(s.library.cudaDriverVersion).toBe('13.0');
    expect(s.library.variants['init']).toBe('nvmlInit_v2');
    expect(s.library.variants['deviceGetMemoryInfo']).toBe('nvmlDeviceGetMemoryInfo_v2');
    expect(s.library.variants['deviceGetComputeRunningProcesses']).toBe('nvmlDeviceGetComputeRunningProcesses_v3');
    expect(s.library.variants['deviceGetPciInfo']).toBe('nvmlDeviceGetPciInfo_v3');
    expect(s.library.variants['deviceGetCount']).toBe('nvmlDeviceGetCount_v2');
    expect(s.deviceCount).toBe(8);
  });

  it('fills every field of every device, identity included', async () => {
    const scenario = busyHost();
    useScenario(scenario);
    const s = await openTrackedSession(freshSimulator());
    const before = Date.now();
    const snap = await s.snapshot({ processes: true });
    expect(snap.takenAt).toBeGreaterThanOrEqual(before - 1);
    expect(snap.devices).toHaveLength(8);
    snap.devices.forEach((device, i) => {
      const source = scenario.devices[i]!;
      const memory = source['memory'] as { totalBytes: number; reservedBytes: number; usedBytes: number };
      expect(device.index).toBe(i);
      expect(device.name).toBe('NVIDIA RTX PRO 6000 Blackwell Server Edition');
      expect(device.uuid).toBe(source['uuid']);
      expect(device.pciBusId).toBe(source['pciBusId']);
      expect(device.minorNumber).toBe(source['minorNumber']);
      expect(device.computeCapability).toBe('12.0');
      expect(device.memory).toEqual({
        totalBytes: memory.totalBytes,
        reservedBytes: memory.reservedBytes,
        usedBytes: memory.usedBytes,
        freeBytes: memory.totalBytes - memory.reservedBytes - memory.usedBytes,
        source: 'v2',
      });
      expect(device.temperatureC).toBe(source['temperatureC']);
      expect(device.powerWatts).toBeCloseTo(source['powerWatts'] as number, 3);
      expect(device.migMode).toBe(false);
      expect(device.error).toBeNull();
      expect(device.fieldErrors).toEqual({});
      expect(device.processListSource?.symbol).toBe('nvmlDeviceGetComputeRunningProcesses_v3');
    });
    const [d0, , , d3, , , , d7] = snap.devices;
    expect(d0?.utilization).toEqual({ gpuPercent: 97, memoryPercent: 41 });
    expect(d0?.persistenceMode).toBe(true);
    expect(d0?.computeMode).toBe('default');
    expect(d7?.persistenceMode).toBe(false);
    expect(d7?.computeMode).toBe('exclusive_process');
    expect(d0?.processes).toEqual([
      { pid: 4242, usedBytes: 60 * GiB, kinds: ['compute'], gpuInstanceId: null, computeInstanceId: null },
      { pid: 4243, usedBytes: 30 * GiB, kinds: ['compute', 'graphics'], gpuInstanceId: null, computeInstanceId: null },
      { pid: 4244, usedBytes: null, kinds: ['mps'], gpuInstanceId: null, computeInstanceId: null },
    ]);
    expect(d0?.processListSource?.strideBytes).toBe(24);
    expect(d3?.processes).toEqual([
      { pid: 777, usedBytes: 2 * GiB, kinds: ['graphics'], gpuInstanceId: null, computeInstanceId: null },
    ]);
    expect(snap.devices[1]?.processes).toEqual([]);
    expect(snap.devices[1]?.processListSource?.strideBytes).toBeNull();
  });

  it('leaves processes out unless asked, and memoryOnly reads memory alone', async () => {
    useScenario(busyHost());
    const s = await openTrackedSession(freshSimulator());
    const plain = await s.snapshot();
    expect(plain.devices[0]).not.toHaveProperty('processes');
    expect(plain.devices[0]?.temperatureC).toBe(31);
    const fast = await s.snapshot({ memoryOnly: true, devices: [3, 0] });
    expect(fast.devices.map((d) => d.index)).toEqual([3, 0]);
    expect(fast.devices[1]?.memory?.usedBytes).toBe(90 * GiB);
    expect(fast.devices[1]?.temperatureC).toBeNull();
    expect(fast.devices[1]?.utilization).toBeNull();
  });

  it('gives the same answer from snapshotSync and the readMemorySync fast path', async () => {
    useScenario(busyHost());
    const s = await openTrackedSession(freshSimulator());
    const asyncSnap = await s.snapshot({ processes: true });
    const syncSnap = s.snapshotSync({ processes: true });
    expect(syncSnap.devices).toEqual(asyncSnap.devices);
    const out = s.readMemorySync();
    expect(out).toHaveLength(8 * 5);
    expect(Array.from(out.subarray(0, 5))).toEqual([102641958912, 102641958912 - 493879296 - 90 * GiB, 90 * GiB, 493879296, 0]);
    const reused = new Float64Array(40);
    expect(s.readMemorySync(reused)).toBe(reused);
  });

  it('the memory-only snapshotSync fast path equals the general decode, and falls back to it on a failed read', async () => {
    useScenario(busyHost());
    const s = await openTrackedSession(freshSimulator());
    const all = [0, 1, 2, 3, 4, 5, 6, 7];
    const fast = s.snapshotSync({ memoryOnly: true });
    const general = s.snapshotSync({ memoryOnly: true, devices: all });
    expect(fast.devices).toEqual(general.devices);
    expect(await s.snapshot({ memoryOnly: true })).toMatchObject({ devices: general.devices });

    useScenario({ ...busyHost(), faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', device: 2, return: 15 }] });
    const lost = await openTrackedSession(freshSimulator());
    const viaFallback = lost.snapshotSync({ memoryOnly: true });
    expect(viaFallback.devices[2]?.error?.code).toBe('NVML_ERROR_GPU_IS_LOST');
    expect(viaFallback.devices).toEqual(lost.snapshotSync({ memoryOnly: true, devices: all }).devices);
  });

  it('a timeline set reaches every per-device figure of the next snapshot, and a null one reads as unsupported', async () => {
    // End to end through both field tables: the simulator's (parse and merge of a `set`) and the
    // addon's (query, reading member, wire slot). Set before the second snapshot's first figure query.
    const scenario = busyHost();
    scenario.devices = scenario.devices.slice(0, 2);
    const changes = {
      persistenceMode: false,
      computeMode: 'prohibited',
      utilization: { gpu: 55, memory: 12 },
      temperatureC: 77,
      powerWatts: 321.5,
    };
    // A GPU in MIG mode answers utilisation NOT_SUPPORTED, as a real one does.
    const unsupported = { migMode: true, persistenceMode: null, computeMode: null, temperatureC: null, powerWatts: null };
    scenario['timeline'] = [
      { atCall: 2, function: 'nvmlDeviceGetPersistenceMode', device: 0, set: changes },
      { atCall: 2, function: 'nvmlDeviceGetPersistenceMode', device: 1, set: unsupported },
    ];
    useScenario(scenario);
    const s = await openTrackedSession(freshSimulator());
    const before = (await s.snapshot()).devices;
    expect(before[0]).toMatchObject({ persistenceMode: true, computeMode: 'default', migMode: false });
    expect(before[0]?.utilization).toEqual({ gpuPercent: 97, memoryPercent: 41 });
    expect(before[0]?.temperatureC).not.toBe(77);
    const after = (await s.snapshot()).devices;
    expect(after[0]).toMatchObject({
      persistenceMode: false,
      computeMode: 'prohibited',
      migMode: false,
      utilization: { gpuPercent: 55, memoryPercent: 12 },
      temperatureC: 77,
    });
    expect(after[0]?.powerWatts).toBeCloseTo(321.5, 3);
    expect(after[0]?.fieldErrors).toEqual({});
    expect(before[1]?.migMode).toBe(false);
    expect(after[1]).toMatchObject({ migMode: true, migDevices: [], persistenceMode: null, computeMode: null });
    expect(after[1]?.utilization).toBeNull();
    expect(after[1]).toMatchObject({ temperatureC: null, powerWatts: null });
    const failed = Object.keys(after[1]?.fieldErrors ?? {}).sort();
    expect(failed).toEqual(['computeMode', 'persistenceMode', 'powerWatts', 'temperatureC', 'utilization']);
    const utilization = after[1]?.fieldErrors['utilization'];
    expect(utilization).toMatchObject({ code: 'NVML_ERROR_NOT_SUPPORTED', fn: 'nvmlDeviceGetUtilizationRates' });
  });

  it('rejects bad snapshot options with errors naming the option', async () => {
    useScenario(busyHost());
    const s = await openTrackedSession(freshSimulator());
    await expect(s.snapshot({ devices: [8] })).rejects.toThrow(/'devices' contains 8.*0\.\.7/);
    await expect(s.snapshot({ processes: 'yes' as unknown as boolean })).rejects.toSatisfy((error) => error instanceof ConfigError && error.code === 'GPUGATE_CONFIG' && error.option === 'processes');
    expect(() => s.snapshotSync({ devices: [1.5] })).toThrow(expect.objectContaining({ name: 'ConfigError', code: 'GPUGATE_CONFIG', option: 'devices' }));
    expect(() => s.readMemorySync(new Float64Array(3))).toThrow(/'out' has 3 elements; 40 are needed/);
  });
});

describe('what a snapshot costs in NVML calls', () => {
  it('reads identity once per session, one init and one shutdown, and only memory on the fast path', async () => {
    useScenario(busyHost());
    const stats = path.join(tempDir(), 'call-stats.json');
    process.env['GPUGATE_SIM_STATS'] = stats;
    try {
      const s = await openNvml({ libraryPath: freshSimulator() });
      for (let i = 0; i < 5; i++) await s.snapshot({ processes: true });
      for (let i = 0; i < 3; i++) s.snapshotSync({ memoryOnly: true });
      s.readMemorySync();
      await s.close();
    } finally {
      delete process.env['GPUGATE_SIM_STATS'];
    }
    const calls = (JSON.parse(fs.readFileSync(stats, 'utf8')) as { calls: Record<string, number> }).calls;
    expect(calls['nvmlInit_v2']).toBe(1);
    expect(calls['nvmlShutdown']).toBe(1);
    for (const identity of ['nvmlDeviceGetHandleByIndex_v2', 'nvmlDeviceGetName', 'nvmlDeviceGetUUID', 'nvmlDeviceGetPciInfo_v3',
      'nvmlDeviceGetMinorNumber', 'nvmlDeviceGetCudaComputeCapability', 'nvmlDeviceGetFieldValues']) {
      expect(calls[identity], identity).toBe(8);
    }
    expect(calls['nvmlDeviceGetMemoryInfo_v2']).toBe(8 * (5 + 3 + 1));
    expect(calls['nvmlDeviceGetTemperature']).toBe(8 * 5); // not on the memory-only paths
    expect(calls['nvmlDeviceGetComputeRunningProcesses_v3']).toBeGreaterThanOrEqual(8 * 5);
    expect(calls['nvmlDeviceGetMemoryInfo']).toBeUndefined(); // no v1 fallback while _v2 answers
  });

  it('sees a rewritten scenario on the next snapshot (nothing but identity is cached)', async () => {
    const scenario = busyHost();
    const file = useScenario(scenario);
    const s = await openNvml({ libraryPath: freshSimulator() });
    try {
      expect((await s.snapshot()).devices[2]?.memory?.usedBytes).toBe(0);
      scenario.devices[2]!['memory'] = { totalBytes: 102641958912, reservedBytes: 493879296, usedBytes: 7 * GiB };
      fs.writeFileSync(`${file}.next`, JSON.stringify(scenario));
      fs.renameSync(`${file}.next`, file);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect((await s.snapshot()).devices[2]?.memory?.usedBytes).toBe(7 * GiB);
      expect(s.readMemorySync()[2 * 5 + 2]).toBe(7 * GiB);
    } finally {
      await s.close();
    }
  });
});
