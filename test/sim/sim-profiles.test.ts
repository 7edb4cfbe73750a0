/**
 * The simulator as other people's NVML tools see it: each driver profile's library exports
 * exactly its profile's symbols (dlsym), the 535.54 quirk is misread by a 24-byte _v3 reader as
 * on a real host and read right through _v2 or by a reader that tells the driver by its exports,
 * the monitoring queries answer from the scenario with per-model defaults (or NOT_SUPPORTED), and
 * MIG reads as NVML documents it. Read by the independent C client (test/c/nvml_client.c).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { simDriverProfiles } from '../../src/simulator/sim-library';
import { runCli, cliEnv } from '../helpers/cli';
import { buildNvmlClient, runNvmlClient } from '../helpers/nvml-client';
import { bundledScenario, repoRoot, simDevice, simEnv, simLibraryFor, simLibraryPath, simProfileLibraryPath, writeScenario } from '../helpers/sim';

const GiB = 2 ** 30;
let client = '';
let remove = (): void => {};

beforeAll(async () => {
  ({ client, remove } = await buildNvmlClient());
});
afterAll(() => remove());

async function lines(lib: string, args: string[], scenario: string): Promise<Map<string, string[]>> {
  const result = await runNvmlClient(client, ['--lib', lib, ...args], simEnv(scenario));
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  const out = new Map<string, string[]>();
  for (const line of result.stdout.trim().split('\n')) {
    const [name, ...rest] = line.split(' ');
    out.set(rest[0] !== undefined && /^\d+$/.test(rest[0]) && name === 'slot' ? `slot ${rest[0]}` : name!, name === 'slot' ? rest.slice(1) : rest);
  }
  return out;
}

/** What nvitop 1.x, gpustat 1.1, nvidia-ml-py 12.5x and nvml-wrapper 0.9 resolve on a current driver (their own NVML calls). */
const MONITORING_TOOL_SYMBOLS = [
  'nvmlInit', 'nvmlInit_v2', 'nvmlInitWithFlags', 'nvmlShutdown', 'nvmlErrorString',
  'nvmlSystemGetDriverVersion', 'nvmlSystemGetNVMLVersion', 'nvmlSystemGetCudaDriverVersion', 'nvmlSystemGetCudaDriverVersion_v2',
  'nvmlSystemGetProcessName', 'nvmlDeviceGetCount', 'nvmlDeviceGetCount_v2', 'nvmlDeviceGetHandleByIndex', 'nvmlDeviceGetHandleByIndex_v2',
  'nvmlDeviceGetHandleByUUID', 'nvmlDeviceGetHandleByPciBusId', 'nvmlDeviceGetHandleByPciBusId_v2', 'nvmlDeviceGetIndex',
  'nvmlDeviceGetName', 'nvmlDeviceGetUUID', 'nvmlDeviceGetSerial', 'nvmlDeviceGetMinorNumber', 'nvmlDeviceGetPciInfo', 'nvmlDeviceGetPciInfo_v3',
  'nvmlDeviceGetCudaComputeCapability', 'nvmlDeviceGetMemoryInfo', 'nvmlDeviceGetMemoryInfo_v2', 'nvmlDeviceGetBAR1MemoryInfo',
  'nvmlDeviceGetConfComputeMemSizeInfo', 'nvmlDeviceGetRunningProcessDetailList',
  'nvmlDeviceGetComputeRunningProcesses', 'nvmlDeviceGetComputeRunningProcesses_v2', 'nvmlDeviceGetComputeRunningProcesses_v3',
  'nvmlDeviceGetGraphicsRunningProcesses', 'nvmlDeviceGetGraphicsRunningProcesses_v2', 'nvmlDeviceGetGraphicsRunningProcesses_v3',
  'nvmlDeviceGetMPSComputeRunningProcesses', 'nvmlDeviceGetMPSComputeRunningProcesses_v2', 'nvmlDeviceGetMPSComputeRunningProcesses_v3',
  'nvmlDeviceGetProcessUtilization', 'nvmlDeviceGetUtilizationRates', 'nvmlDeviceGetEncoderUtilization', 'nvmlDeviceGetDecoderUtilization',
  'nvmlDeviceGetFanSpeed', 'nvmlDeviceGetFanSpeed_v2', 'nvmlDeviceGetNumFans', 'nvmlDeviceGetTemperature', 'nvmlDeviceGetTemperatureV', 'nvmlDeviceGetPowerUsage',
  'nvmlDeviceGetPowerManagementLimit', 'nvmlDeviceGetEnforcedPowerLimit', 'nvmlDeviceGetClockInfo', 'nvmlDeviceGetMaxClockInfo',
  'nvmlDeviceGetPerformanceState', 'nvmlDeviceGetTotalEccErrors', 'nvmlDeviceGetPcieThroughput', 'nvmlDeviceGetDisplayActive',
  'nvmlDeviceGetDisplayMode', 'nvmlDeviceGetDriverModel', 'nvmlDeviceGetPersistenceMode', 'nvmlDeviceGetComputeMode',
  'nvmlDeviceGetMigMode', 'nvmlDeviceGetMaxMigDeviceCount', 'nvmlDeviceGetMigDeviceHandleByIndex', 'nvmlDeviceIsMigDeviceHandle',
  'nvmlDeviceGetDeviceHandleFromMigDeviceHandle', 'nvmlDeviceGetGpuInstanceId', 'nvmlDeviceGetComputeInstanceId', 'nvmlDeviceGetFieldValues',
];

describe('driver profiles', () => {
  const profiles = simDriverProfiles(repoRoot());
  const everySymbol = [...new Set(profiles.flatMap((p) => p.symbols))];

  it('each profile library exports exactly its profile symbols, as seen through dlsym', async () => {
    expect(profiles.map((p) => p.name)).toEqual(['legacy', 'r470', 'r510', 'r535-early', 'r535', 'current']);
    for (const profile of profiles) {
      const result = await runNvmlClient(client, ['--lib', simProfileLibraryPath(profile.library), 'symbols', ...everySymbol], process.env);
      const present = result.stdout.trim().split('\n').filter((l) => l.endsWith(' present')).map((l) => l.split(' ')[0]);
      expect(present, profile.name).toEqual(everySymbol.filter((s) => profile.symbols.includes(s)));
    }
    const byName = new Map(profiles.map((p) => [p.name, new Set(p.symbols)]));
    expect(byName.get('r470')?.has('nvmlDeviceGetComputeRunningProcesses_v2')).toBe(true);
    for (const absent of ['nvmlDeviceGetComputeRunningProcesses_v3', 'nvmlDeviceGetMemoryInfo_v2']) expect(byName.get('r470')?.has(absent)).toBe(false);
    expect(byName.get('r535-early')?.has('nvmlDeviceGetConfComputeMemSizeInfo')).toBe(true);
    expect(byName.get('r535-early')?.has('nvmlDeviceGetRunningProcessDetailList')).toBe(false);
    expect(byName.get('current')?.has('nvmlDeviceGetRunningProcessDetailList')).toBe(true);
  });

  it('the current profile exports every NVML function nvitop, gpustat and nvidia-ml-py call on a current driver', async () => {
    for (const lib of [simLibraryPath(), `${repoRoot()}/build/Release/sim/libnvidia-ml.so.1`, `${repoRoot()}/build/Release/sim/current/libnvidia-ml.so.1`]) {
      const result = await runNvmlClient(client, ['--lib', lib, 'symbols', ...MONITORING_TOOL_SYMBOLS], process.env);
      expect(result.stdout.trim().split('\n').filter((l) => !l.endsWith(' present')), lib).toEqual([]);
    }
  });

  it('a library refuses a scenario of another driver branch, naming the library to load', async () => {
    const file = writeScenario({ system: { driverVersion: '535.54.03' }, devices: [simDevice(0)] });
    const result = await runNvmlClient(client, ['--lib', simLibraryPath(), 'dump'], simEnv(file));
    expect(result.code).toBe(3);
    expect(result.stdout.trim()).toBe(
      `init-failed rc=999 lastError=${file}:3:22: expected a driver of the current profile, which this simulator library is built as; ` +
        'found 535.54.03 (the r535-early profile): load the library built for it (sim/r535-early/libnvidia-ml.so.1; `gpugate sim` picks it)',
    );
    const named = writeScenario({ system: { driverProfile: 'r470' }, devices: [simDevice(0)] });
    expect(simLibraryFor(named)).toBe(simProfileLibraryPath('gpugate_sim_r470'));
    const [dump] = (await runNvmlClient(client, ['--lib', simLibraryFor(named), '--v1', 'dump'], simEnv(named))).stdout.trim().split('\n');
    expect(JSON.parse(dump!).count).toBe(1);
    const v2Fault = writeScenario({ system: { driverProfile: 'r470' }, devices: [simDevice(0)], faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', return: 3 }] });
    const noV2 = await runNvmlClient(client, ['--lib', simLibraryFor(v2Fault), '--v1', 'dump'], simEnv(v2Fault));
    expect(noV2.stdout).toContain('expected an NVML symbol the simulator exports in the r470 driver profile (or a prefix ending in \'*\') for "function", found "nvmlDeviceGetMemoryInfo_v2"');
    // The leading MAJOR.MINOR decides; a version without one needs a driverProfile.
    const suffixed = writeScenario({ system: { driverVersion: '535.54.03-custom' }, devices: [simDevice(0)] });
    expect(simLibraryFor(suffixed)).toBe(simProfileLibraryPath('gpugate_sim_r535_early'));
    expect((await runNvmlClient(client, ['--lib', simLibraryFor(suffixed), 'dump'], simEnv(suffixed))).code).toBe(0);
    const unversioned = writeScenario({ system: { driverVersion: 'beta' }, devices: [simDevice(0)] });
    expect((await runNvmlClient(client, ['--lib', simLibraryPath(), 'dump'], simEnv(unversioned))).stdout).toContain(
      'expected a driver version starting MAJOR.MINOR (e.g. "535.54.03") for "driverVersion", or a "driverProfile"',
    );
    const bad = writeScenario({ system: { driverProfile: 'r999' }, devices: [simDevice(0)] });
    const rejected = await runNvmlClient(client, ['--lib', simLibraryPath(), 'dump'], simEnv(bad));
    expect(rejected.stdout).toContain('expected one of "legacy", "r470", "r510", "r535-early", "r535", "current" for "driverProfile"');
  });
});

describe('r535-stride.json: the driver 535.54 process-list quirk', () => {
  const file = bundledScenario('r535-stride');

  it('is misread by a reader that assumes 24-byte _v3 entries, exactly as on a real 535.54 host', async () => {
    const out = await runNvmlClient(client, ['--lib', simLibraryFor(file), 'procs24', '0'], simEnv(file));
    // Entry 1 starts inside entry 0's usedGpuCcProtectedMemory (0), entry 2 at entry 1's instance ids:
    // the all-ones pid nvitop reported as NoSuchProcess(pid=4294967295).
    expect(out.stdout.trim()).toBe(`rc=0 stride=24 30101:${4 * GiB} 0:30102 4294967295:0`);
  });

  it('is read right by a reader that tells the driver by its exports, and through _v2', async () => {
    const detect = await runNvmlClient(client, ['--lib', simLibraryFor(file), 'detect', '0'], simEnv(file));
    expect(detect.stdout.trim()).toBe(`rc=0 stride=32 30101:${4 * GiB} 30102:${8 * GiB} 30103:${12 * GiB}`);
    const v2 = await runNvmlClient(client, ['--lib', simLibraryFor(file), 'rawprocs', '0', 'nvmlDeviceGetComputeRunningProcesses_v2'], simEnv(file));
    expect(v2.stdout.trim()).toBe('rc=0 count=3 bytesWritten=72 pids=30101,30102,30103');
    // The same reader on a current driver reads 24-byte entries.
    const current = writeScenario({ devices: [simDevice(0, { processes: [{ pid: 41, usedBytes: GiB }, { pid: 42, usedBytes: 2 * GiB }] })] });
    const read = await runNvmlClient(client, ['--lib', simLibraryFor(current), 'detect', '0'], simEnv(current));
    expect(read.stdout.trim()).toBe(`rc=0 stride=24 41:${GiB} 42:${2 * GiB}`);
  });
});

describe('monitoring queries', () => {
  it('answer with the simulated model defaults: an A100-SXM4 is passively cooled, 400 W, 1410 MHz, 12 NVLinks', async () => {
    const file = bundledScenario('r535-stride');
    const t = await lines(simLibraryFor(file), ['telemetry', '0'], file);
    expect(t.get('fan')?.[0]).toBe('3');
    expect(t.get('power_limit')).toEqual(['0', '400000']);
    expect(t.get('enforced_power_limit')).toEqual(['0', '400000']);
    expect(t.get('clock_0')).toEqual(['0', '210', '0', '1410']);
    expect(t.get('clock_2')).toEqual(['0', '1593', '0', '1593']);
    expect(t.get('pstate')).toEqual(['0', '0']);
    expect(t.get('ecc_0')).toEqual(['0', '0']);
    expect(t.get('encoder')).toEqual(['0', '0', '167000']);
    expect(t.get('display_active')).toEqual(['0', '0']);
    expect(t.get('driver_model')).toEqual(['3']);
    expect(t.get('bar1')).toEqual(['0', String(128 * GiB), String(128 * GiB - 2 * 2 ** 20), String(2 * 2 ** 20)]);
    expect(t.get('fields')).toEqual(['0', '0:1:60000', '0:1:12', '3']);
    expect(t.get('process_utilization')).toEqual(['0', '30101:0:0', '30102:0:0', '30103:0:0']);
    expect(t.get('conf_compute_mem')).toEqual(['0', '0', String(85899345920 / 1024)]);
    // 535.54 had neither of these.
    expect(t.get('nvmlDeviceGetTemperatureV')).toEqual(['absent']);
    expect(t.get('nvmlDeviceGetRunningProcessDetailList')).toEqual(['absent']);
  });

  it('answer from the scenario fields, NOT_SUPPORTED where a field is null, with the versioned structs checked', async () => {
    const file = writeScenario({
      devices: [
        simDevice(0, {
          name: 'NVIDIA GeForce RTX 4090',
          fanSpeedPercent: 41, powerLimitWatts: 450, clocksMHz: { graphics: 2520, memory: 10501 }, maxClocksMHz: null,
          performanceState: 2, eccErrors: { corrected: 7, uncorrected: 1 }, encoderUtilization: 12, decoderUtilization: null,
          displayActive: true, displayMode: true, pcieThroughputKBps: { tx: 1200, rx: 350 }, serial: null, temperatureC: 64,
          bar1Memory: { totalBytes: 256 * 2 ** 20, usedBytes: 10 * 2 ** 20 }, powerWatts: 301.4,
          processes: [{ pid: 501, usedBytes: GiB, smUtilization: 80, memoryUtilization: 35 }, { pid: 502, usedBytes: GiB, kinds: ['graphics'] }],
        }),
      ],
    });
    const t = await lines(simLibraryPath(), ['telemetry', '0'], file);
    expect(t.get('fan')).toEqual(['0', '41']);
    expect(t.get('power_limit')).toEqual(['0', '450000']);
    expect(t.get('clock_0')).toEqual(['0', '2520', '3', '0']);
    expect(t.get('clock_1')?.slice(0, 2)).toEqual(['0', '210']); // a domain the scenario leaves out keeps the model's
    expect(t.get('clock_2')?.slice(0, 2)).toEqual(['0', '10501']);
    expect(t.get('pstate')).toEqual(['0', '2']);
    expect(t.get('ecc_0')).toEqual(['0', '7']);
    expect(t.get('ecc_1')).toEqual(['0', '1']);
    expect(t.get('encoder')).toEqual(['0', '12', '167000']);
    expect(t.get('decoder')?.[0]).toBe('3');
    expect(t.get('display_active')).toEqual(['0', '1']);
    expect(t.get('display_mode')).toEqual(['0', '1']);
    expect(t.get('pcie')).toEqual(['0', '1200', '0', '350']);
    expect(t.get('serial')?.[0]).toBe('3');
    expect(t.get('bar1')).toEqual(['0', String(256 * 2 ** 20), String(246 * 2 ** 20), String(10 * 2 ** 20)]);
    expect(t.get('fields')).toEqual(['0', '0:1:301400', '0:1:0', '3']);
    expect(t.get('process_utilization')).toEqual(['0', '501:80:35', '502:0:0']);
    expect(t.get('temperature_v')).toEqual(['0', '64', '25']);
    expect(t.get('detail_list')).toEqual(['7', '1', '0', `501:${GiB}:4294967295`]);
    expect(t.get('is_mig')).toEqual(['0', '0']);
  });
});

describe('MIG as NVML documents it', () => {
  it('BAR1 and IsMigDeviceHandle on MIG handles, holes between slots, the parent listing its slots processes, 0 slots with MIG off', async () => {
    const file = bundledScenario('mig');
    const on = await lines(simLibraryPath(), ['migextra', '0'], file);
    expect(on.get('max')).toEqual(['0', '4']);
    expect(on.get('parent_is_mig')).toEqual(['0']);
    expect(on.get('slot 0')).toEqual(['0', 'is_mig=1', `bar1=0:${128 * GiB}`, 'procs=7:1']);
    expect(on.get('slot 1')).toEqual(['0', 'is_mig=1', `bar1=0:${128 * GiB}`, 'procs=0:0']);
    expect(on.get('slot 2')).toEqual(['6']);
    expect(on.get('slot 3')?.[0]).toBe('0');
    expect(on.get('parent_procs')).toEqual(['0', '51007:3:0']);
    const off = await lines(simLibraryPath(), ['migextra', '1'], file);
    expect(off.get('max')).toEqual(['0', '0']);
    expect(off.get('parent_procs')).toEqual(['0']);
  });
});

describe('profile boundaries, one row per function with its first driver', () => {
  const profiles = simDriverProfiles(repoRoot());
  const exports = (name: string): Set<string> => new Set(profiles.find((p) => p.name === name)?.symbols);

  it('follow the headers: NVML 5.319 _v2 entry points in legacy, MIG and _v2 lists from r470, the 12.2 names from r535-early, TemperatureV from R570 on', async () => {
    const since = (symbol: string): string[] => profiles.filter((p) => p.symbols.includes(symbol)).map((p) => p.name);
    const all = ['legacy', 'r470', 'r510', 'r535-early', 'r535', 'current'];
    for (const symbol of ['nvmlInit_v2', 'nvmlDeviceGetCount_v2', 'nvmlDeviceGetHandleByIndex_v2', 'nvmlDeviceGetHandleByPciBusId_v2', 'nvmlDeviceGetPciInfo_v2']) {
      expect(since(symbol), symbol).toEqual(all);
    }
    for (const symbol of ['nvmlDeviceGetMigMode', 'nvmlDeviceGetComputeRunningProcesses_v2', 'nvmlDeviceGetMPSComputeRunningProcesses_v2', 'nvmlDeviceGetMPSComputeRunningProcesses', 'nvmlDeviceGetPciInfo_v3']) {
      expect(since(symbol), symbol).toEqual(all.slice(1));
    }
    for (const symbol of ['nvmlDeviceGetComputeRunningProcesses_v3', 'nvmlDeviceGetMemoryInfo_v2', 'nvmlDeviceGetNumFans']) expect(since(symbol), symbol).toEqual(all.slice(2));
    for (const symbol of ['nvmlDeviceGetCurrentClocksEventReasons', 'nvmlDeviceGetGpuFabricInfo', 'nvmlDeviceGetConfComputeMemSizeInfo']) {
      expect(since(symbol), symbol).toEqual(all.slice(3));
    }
    expect(since('nvmlDeviceGetRunningProcessDetailList')).toEqual(['r535', 'current']);
    for (const symbol of ['nvmlDeviceGetTemperatureV', 'nvmlDeviceGetAddressingMode', 'nvmlDeviceGetDriverModel_v2']) expect(since(symbol), symbol).toEqual(['current']);
    // The R580 header (NVML 13.0) declares 395 functions; nvmlErrorString is the one it declares without DECLDIR's return type.
    expect(exports('current').size).toBe(396);
    // The legacy library really has them: dlsym through the built file.
    const legacy = await runNvmlClient(client, ['--lib', simProfileLibraryPath('gpugate_sim_legacy'), 'symbols', 'nvmlInit_v2', 'nvmlDeviceGetCount_v2', 'nvmlDeviceGetMigMode'], process.env);
    expect(legacy.stdout.trim().split('\n')).toEqual(['nvmlInit_v2 present', 'nvmlDeviceGetCount_v2 present', 'nvmlDeviceGetMigMode absent']);
  });

  it('a 410 driver is read through the _v2 entry points, with 16-byte process lists, as on a real 410 host', async () => {
    const file = writeScenario({ system: { driverVersion: '410.129' }, devices: [simDevice(0, { processes: [{ pid: 4101, usedBytes: GiB }, { pid: 4102, usedBytes: 2 * GiB }] })] });
    expect(simLibraryFor(file)).toBe(simProfileLibraryPath('gpugate_sim_legacy'));
    const count = await runNvmlClient(client, ['--lib', simLibraryFor(file), 'rawprocs', '0', 'nvmlDeviceGetComputeRunningProcesses'], simEnv(file));
    expect(count.stdout.trim()).toBe('rc=0 count=2 bytesWritten=32 pids=4101,4102');
    const versions = await lines(simLibraryFor(file), ['versions'], file);
    expect(versions.get('driver')).toEqual(['0', '410.129']);
    expect(versions.get('nvml')).toEqual(['0', '10.410.129']);
    expect(versions.get('cuda')).toEqual(['0', '10000']);
  });

  it('a scenario giving only driverVersion gets the NVML and CUDA versions of its branch; given ones are kept', async () => {
    const only = writeScenario({ system: { driverVersion: '535.104.05' }, devices: [simDevice(0)] });
    expect(simLibraryFor(only)).toBe(simProfileLibraryPath('gpugate_sim_r535'));
    const read = await lines(simLibraryFor(only), ['versions'], only);
    expect([read.get('nvml'), read.get('cuda')]).toEqual([['0', '12.535.104.05'], ['0', '12020']]);
    const given = writeScenario({ system: { driverVersion: '570.86.15', nvmlVersion: '12.570.custom', cudaDriverVersion: 12070 }, devices: [simDevice(0)] });
    const kept = await lines(simLibraryFor(given), ['versions'], given);
    expect([kept.get('nvml'), kept.get('cuda')]).toEqual([['0', '12.570.custom'], ['0', '12070']]);
    const defaults = await lines(simLibraryPath(), ['versions'], writeScenario({ devices: [simDevice(0)] }));
    expect([defaults.get('driver'), defaults.get('nvml'), defaults.get('cuda')]).toEqual([['0', '580.95.05'], ['0', '13.580.95.05'], ['0', '13000']]);
  });

  it('the functions with nothing to simulate answer NOT_SUPPORTED once initialised, UNINITIALIZED before, and take faults', async () => {
    const stubs = ['nvmlDeviceGetDriverModel_v2', 'nvmlDeviceGetNumaNodeId', 'nvmlVgpuInstanceGetLicenseInfo_v2', 'nvmlGpmSampleAlloc'];
    for (const s of stubs) expect(exports('current').has(s), s).toBe(true);
    const file = writeScenario({ devices: [simDevice(0)], faults: [{ function: 'nvmlGpmSampleAlloc', return: 999 }] });
    const result = await runNvmlClient(client, ['--lib', simLibraryPath(), 'stubs', ...stubs], simEnv(file));
    expect(result.stdout.trim().split('\n')).toEqual([
      'nvmlDeviceGetDriverModel_v2 before=1 after=3',
      'nvmlDeviceGetNumaNodeId before=1 after=3',
      'nvmlVgpuInstanceGetLicenseInfo_v2 before=1 after=3',
      'nvmlGpmSampleAlloc before=1 after=999',
    ]);
  });
});

describe('utilisation in MIG mode', () => {
  it('a GPU in MIG mode answers NOT_SUPPORTED, as a real driver does; gpugate reports no utilisation for it', async () => {
    const file = bundledScenario('mig');
    expect((await lines(simLibraryPath(), ['utilization', '0'], file)).get('utilization')).toEqual(['3', '0', '0']);
    expect((await lines(simLibraryPath(), ['utilization', '1'], file)).get('utilization')?.[0]).toBe('0');
    const status = await runCli(['status', '--json', '--library', simLibraryPath()], { env: cliEnv(file) });
    expect(status.code, status.stderr).toBe(0);
    const devices = (JSON.parse(status.stdout) as { devices: Array<{ migMode: unknown; utilization: unknown; fieldErrors: Record<string, { code: string }> }> }).devices;
    expect(devices.map((d) => d.utilization)).toEqual([null, { gpuPercent: 0, memoryPercent: 0 }]);
    // The driver's answer is kept, not hidden: the field error names it; nothing else is affected.
    expect(devices.map((d) => Object.entries(d.fieldErrors).map(([field, e]) => `${field}:${e.code}`))).toEqual([['utilization:NVML_ERROR_NOT_SUPPORTED'], []]);
  });
});
