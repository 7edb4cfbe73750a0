/**
 * A third-party NVML client reads every shipped scenario exactly as gpugate does: a small Rust
 * program (test/rust-reader/) built on Debian's nvml-wrapper 0.9 crate, loading the simulator as
 * libnvidia-ml.so.1 through LD_LIBRARY_PATH, compared field by field with `gpugate status --json`
 * (identity, memory v1 and v2, process lists with kinds, MIG devices) and, for the monitoring
 * queries gpugate does not read, with the independent C client. On the 535.54 scenario the
 * wrapper's _v3 call, which assumes 24-byte entries, misreads the list as it did on real 535.54
 * hosts, while its _v2 call reads it right.
 *
 * Skipped (saying why) only when cargo or the crate is absent; .ci/run installs both.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { simProfileForScenario } from '../../src/simulator/sim-library';
import { cliEnv, runCli } from '../helpers/cli';
import { buildNvmlClient, runNvmlClient } from '../helpers/nvml-client';
import { repoRoot, simNvmlDir, simProfileLibraryPath } from '../helpers/sim';

const REGISTRY = '/usr/share/cargo/registry';
const SOURCE_DIR = path.join(repoRoot(), 'test', 'rust-reader');
// Built from a copy under build/ (with its own Cargo.lock, written by whichever cargo runs), so the
// source tree stays clean and cargo reuses the build across runs.
const CRATE_DIR = path.join(repoRoot(), 'build', 'rust-reader', 'crate');
const TARGET_DIR = path.join(repoRoot(), 'build', 'rust-reader', 'target');
const READER = path.join(TARGET_DIR, 'release', 'rust-reader');

function whyUnavailable(): string | null {
  const cargo = spawnSync('cargo', ['--version'], { encoding: 'utf8' });
  if (cargo.error !== undefined || cargo.status !== 0) return 'cargo is not installed (Debian: apt-get install cargo)';
  const crate = fs.existsSync(REGISTRY) && fs.readdirSync(REGISTRY).some((name) => name.startsWith('nvml-wrapper-0.9'));
  if (!crate) return `the nvml-wrapper 0.9 crate is not in ${REGISTRY} (Debian: apt-get install librust-nvml-wrapper-dev)`;
  return null;
}

const unavailable = whyUnavailable();
if (unavailable !== null) console.warn(`rust-reader tests skipped: ${unavailable}`);

/** Every shipped scenario, read before its timeline begins (the same moment for both readers). */
const SCENARIOS = fs.readdirSync(path.join(repoRoot(), 'scenarios')).filter((f) => f.endsWith('.json')).sort();
const NOT_BEGUN = String(Date.now() + 3_600_000);
const PSTATES = ['Zero', 'One', 'Two', 'Three', 'Four', 'Five', 'Six', 'Seven', 'Eight', 'Nine', 'Ten', 'Eleven', 'Twelve', 'Thirteen', 'Fourteen', 'Fifteen'];

type Failed = { error: string };
type Maybe<T> = T | Failed;
interface RustProcess { pid: number; usedBytes: number | null; gpuInstanceId: number | null; computeInstanceId: number | null }
interface RustDevice {
  index: number;
  handle?: Failed;
  name: string; uuid: string; pciBusId: string; minorNumber: number; computeCapability: string;
  memoryV1: { totalBytes: number; freeBytes: number; usedBytes: number };
  memoryV2: { totalBytes: number; reservedBytes: number; freeBytes: number; usedBytes: number };
  computeProcesses: RustProcess[]; computeProcessesV2: RustProcess[]; graphicsProcesses: RustProcess[];
  persistenceMode: Maybe<boolean>; computeMode: Maybe<string>; utilization: Maybe<{ gpuPercent: number; memoryPercent: number }>;
  temperatureC: Maybe<number>; powerMilliwatts: Maybe<number>;
  fanSpeedPercent: Maybe<number>; powerLimitMilliwatts: Maybe<number>; enforcedPowerLimitMilliwatts: Maybe<number>;
  clocksMHz: Record<string, Maybe<number>>; maxClocksMHz: Record<string, Maybe<number>>; performanceState: Maybe<string>;
  eccCorrected: Maybe<number>; eccUncorrected: Maybe<number>; encoderUtilization: Maybe<number>; decoderUtilization: Maybe<number>;
  displayActive: Maybe<boolean>; pcieTxKBps: Maybe<number>; pcieRxKBps: Maybe<number>; serial: Maybe<string>;
  bar1: Maybe<{ totalBytes: number; usedBytes: number }>;
  migMode: boolean | Failed; maxMigDevices?: number;
  migDevices?: Array<{ index: number; uuid: string; gpuInstanceId: number; computeInstanceId: number; memory: RustDevice['memoryV2']; processCount: number }>;
}
interface GpugateProcess { pid: number; usedBytes: number | null; kinds: string[]; gpuInstanceId: number | null; computeInstanceId: number | null }
/** NVML refusals by gpugate's code name: nvml-wrapper's error name and the raw return value. */
const NVML_REFUSALS: Record<string, { wrapper: string; nvmlReturn: number }> = {
  NVML_ERROR_NOT_SUPPORTED: { wrapper: 'NotSupported', nvmlReturn: 3 },
  NVML_ERROR_NO_PERMISSION: { wrapper: 'NoPermission', nvmlReturn: 4 },
};
interface GpugateDevice {
  fieldErrors?: Partial<Record<'memory' | 'migMode', { code: string }>>;
  index: number; uuid: string; name: string; pciBusId: string; minorNumber: number | null; computeCapability: string | null;
  memory: { totalBytes: number; freeBytes: number; usedBytes: number; reservedBytes: number | null } | null;
  persistenceMode: boolean | null; computeMode: string | null; utilization: { gpuPercent: number; memoryPercent: number } | null;
  temperatureC: number | null; powerWatts: number | null; error: { code: string } | null; processes: GpugateProcess[] | null;
  migMode: boolean | null;
  migDevices?: Array<{ index: number; uuid: string; gpuInstanceId: number; computeInstanceId: number; memory: GpugateDevice['memory']; processes: GpugateProcess[] }>;
}

let client = '';
let remove = (): void => {};

describe.skipIf(unavailable !== null)('a Rust nvml-wrapper 0.9 client', () => {
  beforeAll(async () => {
    // Built once per run (a minute on two cores the first time; cargo reuses build/rust-reader after).
    fs.rmSync(CRATE_DIR, { recursive: true, force: true });
    fs.cpSync(SOURCE_DIR, CRATE_DIR, { recursive: true });
    execFileSync('cargo', ['build', '--offline', '--release', '--quiet'], {
      cwd: CRATE_DIR, // where cargo finds .cargo/config.toml (the Debian registry, offline)
      env: { ...process.env, CARGO_TARGET_DIR: TARGET_DIR },
      stdio: ['ignore', 'inherit', 'inherit'],
      timeout: 600_000,
    });
    ({ client, remove } = await buildNvmlClient());
  }, 620_000);
  afterAll(() => remove());

  for (const file of SCENARIOS) {
    it(`reads ${file} as gpugate does`, async () => {
      const scenario = path.join(repoRoot(), 'scenarios', file);
      const profile = simProfileForScenario(scenario, repoRoot());
      const libraryDir = profile.name === 'current' ? simNvmlDir() : simNvmlDir(profile.name);
      const env = { ...process.env, GPUGATE_SIM_SCENARIO: scenario, GPUGATE_SIM_STARTED_AT: NOT_BEGUN, LD_LIBRARY_PATH: libraryDir };
      const rust = JSON.parse(execFileSync(READER, [], { env, encoding: 'utf8' })) as { driverVersion: string; count: number; devices: RustDevice[] };
      const status = await runCli(['status', '--json', '--library', simProfileLibraryPath(profile.library)], {
        env: cliEnv(scenario, { GPUGATE_SIM_STARTED_AT: NOT_BEGUN }),
      });
      const ours = JSON.parse(status.stdout) as { library: { driverVersion: string }; devices: GpugateDevice[] };
      expect(rust.driverVersion).toBe(ours.library.driverVersion);
      expect(rust.count).toBe(ours.devices.length);
      for (const [i, g] of ours.devices.entries()) {
        const r = rust.devices[i]!;
        if (g.error !== null) {
          expect(g.error.code).toBe('NVML_ERROR_GPU_IS_LOST');
          expect(r.handle).toEqual({ error: 'GpuLost' });
          continue;
        }
        expect({ name: r.name, uuid: r.uuid, pciBusId: r.pciBusId, minorNumber: r.minorNumber, cc: r.computeCapability }).toEqual({
          name: g.name, uuid: g.uuid, pciBusId: g.pciBusId, minorNumber: g.minorNumber, cc: g.computeCapability,
        });
        const m = g.memory;
        if (m === null) {
          // gpugate names the memory query's NVML code; the Rust client meets the same refusal (wrapper and raw call).
          const refusal = NVML_REFUSALS[g.fieldErrors?.memory?.code ?? ''];
          expect(refusal, `${file} GPU ${i}: gpugate has no memory and names ${JSON.stringify(g.fieldErrors?.memory)}`).toBeDefined();
          expect(r.memoryV1).toEqual({ error: refusal!.wrapper });
          expect(r.memoryV2).toEqual({ error: `nvmlReturn ${refusal!.nvmlReturn}` });
        } else {
          expect(r.memoryV2).toEqual({ totalBytes: m.totalBytes, reservedBytes: m.reservedBytes, freeBytes: m.freeBytes, usedBytes: m.usedBytes });
          expect(r.memoryV1).toEqual({ totalBytes: m.totalBytes, freeBytes: m.freeBytes, usedBytes: m.usedBytes + m.reservedBytes! });
        }
        const entries = (kind: string) => (g.processes ?? []).filter((p) => p.kinds.includes(kind))
          .map((p) => ({ pid: p.pid, usedBytes: p.usedBytes, gpuInstanceId: p.gpuInstanceId, computeInstanceId: p.computeInstanceId }));
        if (g.processes === null) {
          // Unreadable lists (holders-unknown.json): every list variant answers the same NVML code.
          const code = (g as GpugateDevice & { fieldErrors: Record<string, { code: string }> }).fieldErrors['processes']?.code;
          const unreadable = { error: code === 'NVML_ERROR_NO_PERMISSION' ? 'NoPermission' : 'NotSupported' };
          for (const list of [r.computeProcesses, r.computeProcessesV2, r.graphicsProcesses]) expect(list, `${file} GPU ${i}`).toEqual(unreadable);
        } else expect(r.computeProcessesV2, `${file} GPU ${i} compute _v2`).toEqual(entries('compute'));
        if (g.processes === null) {
          // compared above
        } else if (profile.v3EntryBytes === 32 && r.computeProcessesV2.length >= 3) {
          // The 24-byte reader lands inside the 32-byte entries: the second "process" is pid 0,
          // the third the all-ones pid nvitop reported as NoSuchProcess(pid=4294967295).
          expect(r.computeProcesses[0]).toEqual(r.computeProcessesV2[0]);
          expect(r.computeProcesses.slice(1).map((p) => p.pid)).toEqual([0, 4294967295]);
          expect(r.computeProcesses[1]!.usedBytes).toBe(r.computeProcessesV2[1]!.pid);
        } else {
          expect(r.computeProcesses, `${file} GPU ${i} compute _v3`).toEqual(entries('compute'));
          expect(r.graphicsProcesses, `${file} GPU ${i} graphics _v3`).toEqual(entries('graphics'));
        }
        expect(r.persistenceMode).toEqual(g.persistenceMode ?? { error: 'NotSupported' });
        expect(typeof r.computeMode === 'string' ? r.computeMode.toLowerCase() : r.computeMode).toEqual(g.computeMode ?? { error: 'NotSupported' });
        expect(r.utilization).toEqual(g.utilization ?? { error: 'NotSupported' });
        expect(r.temperatureC).toEqual(g.temperatureC ?? { error: 'NotSupported' });
        expect(r.powerMilliwatts).toEqual(g.powerWatts === null ? { error: 'NotSupported' } : Math.round(g.powerWatts * 1000));
        const migRefusal = NVML_REFUSALS[g.fieldErrors?.migMode?.code ?? ''];
        expect(r.migMode).toEqual(g.migMode === null && migRefusal !== undefined ? { error: `nvmlReturn ${migRefusal.nvmlReturn}` } : g.migMode ?? false);
        // A refused MIG mode query lists no MIG devices on either side.
        expect((g.migMode === null && migRefusal !== undefined ? r.migDevices ?? [] : r.migDevices)?.map((d) => ({ index: d.index, uuid: d.uuid, gpuInstanceId: d.gpuInstanceId, computeInstanceId: d.computeInstanceId, memory: d.memory, processCount: d.processCount })))
          .toEqual((g.migDevices ?? []).map((d) => ({
            index: d.index, uuid: d.uuid, gpuInstanceId: d.gpuInstanceId, computeInstanceId: d.computeInstanceId,
            memory: { totalBytes: d.memory!.totalBytes, reservedBytes: d.memory!.reservedBytes, freeBytes: d.memory!.freeBytes, usedBytes: d.memory!.usedBytes },
            processCount: d.processes.length,
          })));
        await expectMonitoringAgrees(r, i, env);
      }
    }, 60_000);
  }
});

/** The monitoring queries, as the independent C client reads them (a failed one: rc != 0 there, an error here). */
async function expectMonitoringAgrees(r: RustDevice, index: number, env: NodeJS.ProcessEnv): Promise<void> {
  const out = await runNvmlClient(client, ['telemetry', String(index)], env);
  const c = new Map(out.stdout.trim().split('\n').map((line) => {
    const [name, ...rest] = line.split(' ');
    return [name!, rest] as const;
  }));
  const value = (name: string, at = 1): Maybe<number> => (c.get(name)?.[0] === '0' ? Number(c.get(name)![at]) : { error: 'NotSupported' });
  expect(r.fanSpeedPercent).toEqual(value('fan'));
  expect(r.powerLimitMilliwatts).toEqual(value('power_limit'));
  expect(r.enforcedPowerLimitMilliwatts).toEqual(value('enforced_power_limit'));
  const clocks = ['graphics', 'sm', 'memory', 'video'];
  clocks.forEach((domain, i) => {
    const row = c.get(`clock_${i}`)!;
    expect(r.clocksMHz[domain]).toEqual(row[0] === '0' ? Number(row[1]) : { error: 'NotSupported' });
    expect(r.maxClocksMHz[domain]).toEqual(row[2] === '0' ? Number(row[3]) : { error: 'NotSupported' });
  });
  const pstate = value('pstate');
  expect(r.performanceState).toEqual(typeof pstate === 'number' ? PSTATES[pstate] : pstate);
  expect(r.eccCorrected).toEqual(value('ecc_0'));
  expect(r.eccUncorrected).toEqual(value('ecc_1'));
  expect(r.encoderUtilization).toEqual(value('encoder'));
  expect(r.decoderUtilization).toEqual(value('decoder'));
  const display = value('display_active');
  expect(r.displayActive).toEqual(typeof display === 'number' ? display === 1 : display);
  expect(r.pcieTxKBps).toEqual(value('pcie'));
  expect(r.pcieRxKBps).toEqual(c.get('pcie')?.[2] === '0' ? Number(c.get('pcie')![3]) : { error: 'NotSupported' });
  expect(r.serial).toEqual(c.get('serial')?.[0] === '0' ? c.get('serial')![1] : { error: 'NotSupported' });
  const bar1 = c.get('bar1')!;
  expect(r.bar1).toEqual(bar1[0] === '0' ? { totalBytes: Number(bar1[1]), usedBytes: Number(bar1[3]) } : { error: 'NotSupported' });
}
