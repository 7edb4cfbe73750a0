/**
 * A GPU whose driver names a recovery action (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, field 230:
 * reset, reboot, drain) never frees up by waiting: `check` and `wait` end at once with exit 69
 * and GPUGATE_RECOVERY_REQUIRED, naming the action; a GPU with none is judged as before; a driver
 * that cannot answer the field leaves it unknown and gates nothing. The built CLI as a subprocess
 * against the simulator; "at once" is proved by the simulator's call statistics (one poll).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openNvml } from '../../src/nvml/session';
import { waitForGpusFree } from '../../src/gate/wait';
import { cliEnv, parseJsonOutput, runCli } from '../helpers/cli';
import { freshSimulator } from '../helpers/session-helpers';
import { simDevice, simLibraryFor, testTempDir, writeScenario } from '../helpers/sim';

const work = fs.mkdtempSync(path.join(testTempDir(), 'recovery-'));
afterAll(() => fs.rmSync(work, { recursive: true, force: true }));

/** GPU 0 needs nothing; GPUs 1..4 each need one of NVML's recovery actions. */
const ACTIONS = ['gpu-reset', 'node-reboot', 'drain-p2p', 'drain-and-reset'] as const;
const REMEDIES: Record<(typeof ACTIONS)[number], RegExp> = {
  'gpu-reset': /reset it \(nvidia-smi -r -i 1\)/,
  'node-reboot': /reboot the host: a GPU reset is not enough/,
  'drain-p2p': /stop all peer-to-peer \(NVLink\) traffic/,
  'drain-and-reset': /reduced capacity: drain its work, then reset it \(nvidia-smi -r -i 4\)/,
};
const scenario = writeScenario({
  devices: [simDevice(0, { recoveryAction: 'none' }), ...ACTIONS.map((action, i) => simDevice(i + 1, { recoveryAction: action }))],
});

let runs = 0;
/** The CLI through the scenario's driver profile, with simulator call statistics written to a file of its own. */
async function gpugate(args: string[], scenarioPath: string = scenario): Promise<{ code: number | null; json: Record<string, unknown>; stderr: string; calls: Record<string, number> }> {
  const stats = path.join(work, `stats-${++runs}.json`);
  const run = await runCli([...args, '--json'], { env: cliEnv(scenarioPath, { GPUGATE_NVML_LIBRARY: simLibraryFor(scenarioPath), GPUGATE_SIM_STATS: stats }), killAfterMs: 30_000 });
  const calls = (JSON.parse(fs.readFileSync(stats, 'utf8')) as { calls: Record<string, number> }).calls;
  return { code: run.code, json: parseJsonOutput(run), stderr: run.stderr, calls };
}

describe('a GPU that needs a recovery action ends the gate at once (exit 69)', () => {
  it.each(ACTIONS.map((action, i) => [action, i + 1] as const))('wait --timeout 60s on a GPU needing %s: 69 at the first poll, naming the action', async (action, index) => {
    const { code, json, stderr, calls } = await gpugate(['wait', '--gpus', String(index), '--min-free', '0.5', '--timeout', '60s', '--interval', '100ms']);
    expect(code, stderr).toBe(69);
    expect(json.result).toBe('unavailable');
    expect(json.error).toMatchObject({ code: 'GPUGATE_RECOVERY_REQUIRED' });
    expect(stderr).toContain(`GPU ${index} (GPU-7e570000-0000-4000-8000-${index.toString(16).padStart(12, '0')}`);
    expect(stderr).toContain(`needs recovery action ${action}`);
    expect(stderr).toMatch(/waiting cannot help/);
    expect(stderr).toMatch(REMEDIES[action]);
    // One poll, then the end: the selected GPU's memory read once; the field once per GPU, at open.
    expect(calls['nvmlDeviceGetMemoryInfo_v2']).toBe(1);
    expect(calls['nvmlDeviceGetFieldValues']).toBe(5);
  });

  it('check answers the same for every action', async () => {
    for (const [i, action] of ACTIONS.entries()) {
      const { code, json, stderr } = await gpugate(['check', '--gpus', String(i + 1)]);
      expect(code, stderr).toBe(69);
      expect(json.error).toMatchObject({ code: 'GPUGATE_RECOVERY_REQUIRED' });
      expect(stderr).toContain(`needs recovery action ${action}`);
    }
  });

  it('a selection with one such GPU among free ones still ends at once', async () => {
    const { code, json } = await gpugate(['wait', '--gpus', '0,2', '--timeout', '60s', '--interval', '100ms']);
    expect(code).toBe(69);
    expect(json.error).toMatchObject({ code: 'GPUGATE_RECOVERY_REQUIRED' });
  });

  it('a GPU with no recovery action passes as before, and status shows each GPU\'s action', async () => {
    const check = await gpugate(['check', '--gpus', '0']);
    expect(check.code, check.stderr).toBe(0);
    const status = await gpugate(['status']);
    expect(status.code, status.stderr).toBe(0);
    const devices = status.json.devices as Array<{ index: number; recoveryAction: unknown; fieldErrors: Record<string, unknown> }>;
    expect(devices.map((d) => d.recoveryAction)).toEqual(['none', ...ACTIONS]);
    expect(devices[0]?.fieldErrors).toEqual({});
  });

  it('status text names the action and the step on the GPU that needs one', async () => {
    const run = await runCli(['status', '--gpus', '2'], { env: cliEnv(scenario), killAfterMs: 30_000 });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('recovery action: node-reboot (reboot the host: a GPU reset is not enough)');
  });
});

describe('a driver that cannot answer the recovery action gates as before', () => {
  it('a driver before 570 answers the field NOT_SUPPORTED: unknown, the gate passes even where the key names an action', async () => {
    const older = writeScenario({ system: { driverVersion: '535.104.05' }, devices: [simDevice(0, { recoveryAction: 'gpu-reset' })] });
    const check = await gpugate(['check', '--gpus', '0'], older);
    expect(check.code, check.stderr).toBe(0);
    const status = await gpugate(['status'], older);
    const device = (status.json.devices as Array<{ recoveryAction: unknown; fieldErrors: Record<string, unknown> }>)[0];
    expect(device?.recoveryAction).toBeNull();
    expect(device?.fieldErrors['recoveryAction']).toMatchObject({ code: 'NVML_ERROR_NOT_SUPPORTED', fn: 'nvmlDeviceGetFieldValues' });
  });

  it('a GPU whose field answers NOT_SUPPORTED on a current driver (`null`): unknown, the gate passes', async () => {
    const unsupported = writeScenario({ devices: [simDevice(0, { recoveryAction: null })] });
    const check = await gpugate(['check', '--gpus', '0'], unsupported);
    expect(check.code, check.stderr).toBe(0);
  });

  it('nvmlDeviceGetFieldValues itself failing (FUNCTION_NOT_FOUND): unknown, even on a GPU whose driver would name an action', async () => {
    const failing = writeScenario({
      devices: [simDevice(0, { recoveryAction: 'gpu-reset' })],
      faults: [{ function: 'nvmlDeviceGetFieldValues', return: 13 }],
    });
    const wait = await gpugate(['wait', '--gpus', '0', '--min-free', '0.5', '--stable', '0s', '--timeout', '60s'], failing);
    expect(wait.code, wait.stderr).toBe(0);
    expect(wait.json.result).toBe('ready');
    const status = await gpugate(['status'], failing);
    const device = (status.json.devices as Array<{ recoveryAction: unknown; fieldErrors: Record<string, unknown> }>)[0];
    expect(device?.recoveryAction).toBeNull();
    expect(device?.fieldErrors['recoveryAction']).toMatchObject({ code: 'NVML_ERROR_FUNCTION_NOT_FOUND' });
  });
});

describe('the library reads the recovery action once, at open', () => {
  it('session.devices and every snapshot carry it; waitForGpusFree rejects with GPUGATE_RECOVERY_REQUIRED', async () => {
    const saved = process.env['GPUGATE_SIM_SCENARIO'];
    process.env['GPUGATE_SIM_SCENARIO'] = scenario;
    try {
      const session = await openNvml({ libraryPath: freshSimulator() });
      try {
        expect(session.devices.map((d) => d.recoveryAction)).toEqual(['none', ...ACTIONS]);
        const snapshot = await session.snapshot();
        expect(snapshot.devices.map((d) => d.recoveryAction)).toEqual(['none', ...ACTIONS]);
        expect(session.snapshotSync({ memoryOnly: true }).devices.map((d) => d.recoveryAction)).toEqual(['none', ...ACTIONS]);
      } finally {
        await session.close();
      }
      await expect(waitForGpusFree({ libraryPath: freshSimulator(), gpus: [3], minFree: { fraction: 0.5 }, timeoutMs: 60_000 }))
        .rejects.toMatchObject({ name: 'NvmlError', code: 'GPUGATE_RECOVERY_REQUIRED', device: 3 });
    } finally {
      if (saved === undefined) delete process.env['GPUGATE_SIM_SCENARIO'];
      else process.env['GPUGATE_SIM_SCENARIO'] = saved;
    }
  });
});
