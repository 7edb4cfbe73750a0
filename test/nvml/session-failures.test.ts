import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config-error';
import { isFatalNvmlError, NvmlError } from '../../src/nvml/nvml-error';
import { openNvml } from '../../src/nvml/session';
import { bundledScenario, freshSimulator, GiB, tempDir, useScenario } from '../helpers/session-helpers';
import { closeTrackedSessions, openTrackedSession, trackSession } from '../helpers/tracked-sessions';

afterEach(async () => {
  await closeTrackedSessions();
  delete process.env['GPUGATE_NVML_LIBRARY'];
});

async function openError(promise: Promise<unknown>): Promise<NvmlError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(NvmlError);
  return error as NvmlError;
}

function idleWithFaults(faults: unknown[]) {
  const scenario = bundledScenario('idle-8x-rtx-pro-6000.json');
  scenario['faults'] = faults;
  return scenario;
}

describe('per-device and per-field failures stay where they happen', () => {
  it('reports a lost GPU on that device and still reads the other seven', async () => {
    useScenario(bundledScenario('lost-gpu.json'));
    const snap = await (await openTrackedSession(freshSimulator())).snapshot({ processes: true });
    expect(snap.devices).toHaveLength(8);
    const lost = snap.devices[5];
    expect(lost?.error?.code).toBe('NVML_ERROR_GPU_IS_LOST');
    expect(lost?.error?.nvmlReturn).toBe(15);
    expect(lost?.error?.fn).toMatch(/^nvmlDeviceGet/);
    expect(lost?.memory).toBeNull();
    expect(lost?.temperatureC).toBeNull();
    expect(isFatalNvmlError(lost?.error)).toBe(true);
    for (const device of snap.devices.filter((d) => d.index !== 5)) {
      expect(device.error).toBeNull();
      expect(device.memory?.source).toBe('v2');
      expect(device.memory?.totalBytes).toBe(102641958912);
      expect(device.uuid).toMatch(/^GPU-/);
      expect(device.processes).toEqual([]);
    }
  });

  it('turns GPU_IS_LOST on the memory call into a device error with every field null', async () => {
    useScenario(idleWithFaults([{ function: 'nvmlDeviceGetMemoryInfo_v2', device: 6, return: 15 }]));
    const snap = await (await openTrackedSession(freshSimulator())).snapshot({ processes: true });
    const device = snap.devices[6];
    expect(device?.error).toMatchObject({ code: 'NVML_ERROR_GPU_IS_LOST', fn: 'nvmlDeviceGetMemoryInfo_v2', nvmlReturn: 15 });
    expect(device?.memory).toBeNull();
    expect(device?.persistenceMode).toBeNull();
    expect(device?.processes).toBeNull();
    expect(device?.uuid).toBe(bundledScenario('idle-8x-rtx-pro-6000.json').devices[6]?.['uuid']);
    expect(snap.devices[5]?.error).toBeNull();
    expect(snap.devices[7]?.memory?.source).toBe('v2');
  });

  it('nulls one field with its error when only that query fails', async () => {
    useScenario(
      idleWithFaults([
        { function: 'nvmlDeviceGetTemperature', device: 2, return: 3 },
        { function: 'nvmlDeviceGetPowerUsage', device: 2, return: 77 },
      ]),
    );
    const snap = await (await openTrackedSession(freshSimulator())).snapshot();
    const device = snap.devices[2];
    expect(device?.error).toBeNull();
    expect(device?.temperatureC).toBeNull();
    expect(device?.powerWatts).toBeNull();
    expect(device?.fieldErrors['temperatureC']).toMatchObject({
      code: 'NVML_ERROR_NOT_SUPPORTED',
      nvmlReturn: 3,
      fn: 'nvmlDeviceGetTemperature',
    });
    expect(device?.fieldErrors['powerWatts']).toMatchObject({ code: 'NVML_ERROR_77', nvmlReturn: 77 });
    expect(device?.memory?.usedBytes).toBe(0);
    expect(snap.devices[3]?.temperatureC).toBe(32);
  });

  it('falls back to the v1 memory query when the library refuses the _v2 struct', async () => {
    useScenario(idleWithFaults([{ function: 'nvmlDeviceGetMemoryInfo_v2', device: 1, return: 25 }]));
    const snap = await (await openTrackedSession(freshSimulator())).snapshot();
    expect(snap.devices[1]?.memory).toEqual({
      totalBytes: 102641958912,
      freeBytes: 102641958912 - 493879296,
      usedBytes: 493879296,
      reservedBytes: null,
      source: 'v1',
    });
    expect(snap.devices[1]?.fieldErrors).toEqual({});
    expect(snap.devices[0]?.memory?.source).toBe('v2');
  });

  it('keeps the compute list when only the MPS list is unsupported, and says so', async () => {
    const scenario = idleWithFaults([{ function: 'nvmlDeviceGetMPSComputeRunningProcesses_v3', return: 3 }]);
    scenario.devices[0]!['memory'] = { totalBytes: 102641958912, reservedBytes: 493879296, usedBytes: 4 * GiB };
    scenario.devices[0]!['processes'] = [{ pid: 321, usedBytes: 4 * GiB, kinds: ['compute'] }];
    useScenario(scenario);
    const snap = await (await openTrackedSession(freshSimulator())).snapshot({ processes: true });
    expect(snap.devices[0]?.processes?.map((p) => p.pid)).toEqual([321]);
    expect(snap.devices[0]?.fieldErrors['processes.mps']?.code).toBe('NVML_ERROR_NOT_SUPPORTED');
    expect(snap.devices[0]?.fieldErrors['processes']).toBeUndefined();
  });

  it('nulls the process list when the compute list itself fails', async () => {
    useScenario(idleWithFaults([{ function: 'nvmlDeviceGetComputeRunningProcesses_v3', device: 3, return: 4 }]));
    const snap = await (await openTrackedSession(freshSimulator())).snapshot({ processes: true });
    expect(snap.devices[3]?.processes).toBeNull();
    expect(snap.devices[3]?.fieldErrors['processes']).toMatchObject({ code: 'NVML_ERROR_NO_PERMISSION', nvmlReturn: 4 });
    expect(snap.devices[3]?.error).toBeNull();
    expect(snap.devices[2]?.processes).toEqual([]);
  });

  it('rejects a process list that is implausible at every stride instead of reporting garbage', async () => {
    const scenario = bundledScenario('idle-8x-rtx-pro-6000.json');
    scenario.devices[1]!['memory'] = { totalBytes: 102641958912, reservedBytes: 493879296, usedBytes: 10 * GiB };
    scenario.devices[1]!['processes'] = [{ pid: 4294967000, usedBytes: 1 * GiB, kinds: ['compute'] }];
    useScenario(scenario);
    const snap = await (await openTrackedSession(freshSimulator())).snapshot({ processes: true });
    expect(snap.devices[1]?.processes).toBeNull();
    expect(snap.devices[1]?.fieldErrors['processes']?.code).toBe('GPUGATE_PROCESS_LIST_IMPLAUSIBLE');
    expect(snap.devices[0]?.processes).toEqual([]);
  });
});

describe('init failures map to their code and an actionable message', () => {
  const cases: Array<[number, string, RegExp]> = [
    [9, 'NVML_ERROR_DRIVER_NOT_LOADED', /kernel driver is not loaded/],
    [18, 'NVML_ERROR_LIB_RM_VERSION_MISMATCH', /upgraded without reloading the kernel module; reboot/],
    [4, 'NVML_ERROR_NO_PERMISSION', /no permission/],
    [12, 'NVML_ERROR_LIBRARY_NOT_FOUND', /driver's own libraries/],
    [999, 'NVML_ERROR_UNKNOWN', /dmesg|daemon-reload/],
    [15, 'NVML_ERROR_GPU_IS_LOST', /fallen off the bus: waiting cannot help/],
    [123, 'NVML_ERROR_123', /nvmlInit_v2 failed/],
  ];
  for (const [nvmlReturn, code, advice] of cases) {
    it(`nvmlInit_v2 returning ${nvmlReturn} rejects with ${code}`, async () => {
      useScenario(idleWithFaults([{ function: 'nvmlInit_v2', return: nvmlReturn }]));
      const error = await openError(openNvml({ libraryPath: freshSimulator() }));
      expect(error.code).toBe(code);
      expect(error.nvmlReturn).toBe(nvmlReturn);
      expect(error.fn).toBe('nvmlInit_v2');
      expect(error.device).toBeNull();
      expect(error.message).toMatch(advice);
      expect(error.message).toContain(code);
    });
  }

  it('appends the simulator own explanation for a malformed scenario', async () => {
    const file = path.join(tempDir(), 'broken.json');
    fs.writeFileSync(file, '{ "devices": [ { "name": 12 ');
    process.env['GPUGATE_SIM_SCENARIO'] = file;
    const error = await openError(openNvml({ libraryPath: freshSimulator() }));
    expect(error.code).toBe('NVML_ERROR_UNKNOWN');
    expect(error.message).toContain('(simulator: ');
    expect(error.message).toContain(file);
  });

  it('reports a nonexistent library path with its dlerror text', async () => {
    const missing = path.join(tempDir(), 'no-such-dir', 'libnvidia-ml.so.1');
    const error = await openError(openNvml({ libraryPath: missing }));
    expect(error.code).toBe('GPUGATE_LIBRARY_NOT_FOUND');
    expect(error.nvmlReturn).toBeNull();
    expect(error.dlerrors).toEqual([`${missing}: cannot open shared object file: No such file or directory`]);
    expect(error.message).toContain('libraryPath option');
    expect(error.message).toContain('cannot open shared object file');
    expect(isFatalNvmlError(error)).toBe(true);
  });

  it('reports a file that is not a shared library with the loader text', async () => {
    const notElf = path.join(tempDir(), 'not-a-library.so');
    fs.writeFileSync(notElf, 'hello');
    const error = await openError(openNvml({ libraryPath: notElf }));
    expect(error.code).toBe('GPUGATE_LIBRARY_NOT_FOUND');
    expect(error.dlerrors?.[0]).toMatch(/invalid ELF header|file too short/);
  });

  it('uses GPUGATE_NVML_LIBRARY when no option is given, and says so when it fails', async () => {
    useScenario(bundledScenario('idle-8x-rtx-pro-6000.json'));
    const lib = freshSimulator();
    process.env['GPUGATE_NVML_LIBRARY'] = lib;
    const s = await openNvml();
    trackSession(s);
    expect(s.library.path).toBe(lib);
    process.env['GPUGATE_NVML_LIBRARY'] = path.join(tempDir(), 'gone.so');
    const error = await openError(openNvml());
    expect(error.message).toContain('GPUGATE_NVML_LIBRARY');
  });

  it('lists every default place tried, each with its dlerror, when no driver is installed', async () => {
    // This machine has no NVIDIA driver: the default search must fail everywhere.
    const error = await openError(openNvml());
    expect(error.code).toBe('GPUGATE_LIBRARY_NOT_FOUND');
    expect(error.dlerrors?.[0]).toMatch(/^libnvidia-ml\.so\.1: /);
    expect(error.dlerrors?.some((line) => line.startsWith('/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1: '))).toBe(true);
    expect(error.dlerrors?.some((line) => line.startsWith('/usr/local/nvidia/lib64/libnvidia-ml.so.1: '))).toBe(true);
    expect(error.message).toMatch(/container without the driver mounted/);
    expect(error.message).toMatch(/GPUGATE_NVML_LIBRARY/);
  });

  it('rejects bad options with a ConfigError naming the option', async () => {
    await expect(openNvml({ libraryPath: '' })).rejects.toThrow(/'libraryPath' must be a non-empty string/);
    await expect(openNvml({ callTimeoutMs: -5 })).rejects.toThrow(/'callTimeoutMs'/);
    await expect(openNvml({ callTimeoutMs: Number.NaN })).rejects.toSatisfy((error) => error instanceof ConfigError && error.code === 'GPUGATE_CONFIG' && error.option === 'callTimeoutMs');
    await expect(openNvml({ callTimeoutMs: 2 ** 31 + 5 })).rejects.toSatisfy((error) => error instanceof ConfigError && error.option === 'callTimeoutMs' && error.message.includes('2147483647'));
    await expect(openNvml(null as unknown as object)).rejects.toSatisfy((error) => error instanceof ConfigError && error.option === 'options');
  });
});
