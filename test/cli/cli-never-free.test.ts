/**
 * `check` and `wait` never answer "free" when they cannot know: implausible memory figures,
 * a selection of no GPU, a compute mode that admits no new context, a lost GPU named by UUID.
 * The built command as a subprocess, reading the NVML simulator through the real addon, with
 * real processes as holders.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { cliEnv, parseJsonOutput, runCli } from '../helpers/cli';
import { bundledScenario, simDevice, writeScenario } from '../helpers/sim';
import { killSpawned, spawnSleeper } from '../helpers/processes';
import { freshSimulator, useScenario } from '../helpers/session-helpers';
import { DeviceSelectionError } from '../../src/gate/device-selection-error';
import { checkGpusOnce, waitForGpusFree } from '../../src/gate/wait';
import { logText } from '../helpers/log-lines';

const GiB = 1024 ** 3;
const TOTAL = 96 * GiB;
// Real processes stand as GPU holders (spawnSleeper), killed after the tests.
afterAll(killSpawned);

describe('implausible memory figures make a GPU unjudgeable', () => {
  it('exits 69 from check when free exceeds total, with the numbers in the reason', async () => {
    // 92 % used, but the driver reports more free memory than the GPU has.
    const scenario = writeScenario({
      devices: [simDevice(0, { memory: { totalBytes: TOTAL, reservedBytes: 0, usedBytes: 88 * GiB, freeBytes: 120 * GiB } })],
    });
    const run = await runCli(['check', '--min-free', '0.5', '--json'], { env: cliEnv(scenario) });
    expect(run.code).toBe(69);
    expect(logText(run.stderr)).toMatch(/implausible memory figures \(total 96GiB \(103079215104 bytes\), free 120GiB .*free exceeds total/);
    expect(logText(run.stderr)).toMatch(/\(exit 69\/UNAVAILABLE\)/);
    const json = parseJsonOutput(run);
    expect(json.result).toBe('unavailable');
    expect((json.error as { code: string }).code).toBe('GPUGATE_MEMORY_IMPLAUSIBLE');
  });

  it('exits 69 when free + used + reserved is far from total, and passes within the tolerance', async () => {
    // Used 88 GiB of 96 GiB, yet free claims 80 GiB: the sum is 168 GiB.
    const far = writeScenario({
      devices: [simDevice(0, { memory: { totalBytes: TOTAL, reservedBytes: 0, usedBytes: 88 * GiB, freeBytes: 80 * GiB } })],
    });
    const farRun = await runCli(['check', '--max-used', '95%'], { env: cliEnv(far) });
    expect(farRun.code).toBe(69);
    expect(logText(farRun.stderr)).toMatch(/free \+ used \+ reserved = 168GiB, more than 1GiB away from total/);
    // 10 MiB of rounding between the three figures is a real driver's, not a fault.
    const near = writeScenario({
      devices: [simDevice(0, { memory: { totalBytes: TOTAL, reservedBytes: GiB, usedBytes: 0, freeBytes: 95 * GiB - 10 * 2 ** 20 } })],
    });
    const nearRun = await runCli(['check', '--max-used', '95%'], { env: cliEnv(near) });
    expect(logText(nearRun.stderr)).not.toMatch(/implausible/);
    expect(nearRun.code).toBe(0);
  });

  it('ends a wait at once (exit 69) rather than waiting on figures that cannot be believed', async () => {
    const scenario = writeScenario({
      devices: [simDevice(0, { memory: { totalBytes: TOTAL, reservedBytes: 0, usedBytes: 90 * GiB, freeBytes: 200 * GiB } })],
    });
    const run = await runCli(['wait', '--min-free', '0.9', '--stable', '0s', '--timeout', '20s', '--interval', '50ms'], { env: cliEnv(scenario) });
    expect(run.code).toBe(69);
    expect(logText(run.stderr)).toMatch(/GPU 0 .*implausible memory figures/);
  });
});

describe('a driver whose v2 used figure includes reserved memory (NVIDIA\'s R525 reference semantics)', () => {
  const MiB = 1024 ** 2;
  // An L40S-class card: 569 MiB reserved is more than 1 % of its 46 GiB, so a check that only
  // accepted free + used + reserved = total called every reading of it implausible.
  const l40s = (quirk: boolean, usedBytes: number): string =>
    writeScenario({
      system: { memoryV2UsedIncludesReserved: quirk },
      devices: [simDevice(0, { name: 'NVIDIA L40S', memory: { totalBytes: 46068 * MiB, reservedBytes: 569 * MiB, usedBytes } })],
    });

  it('judges an idle card free under either semantics and records which one the driver uses', async () => {
    for (const quirk of [true, false]) {
      const run = await runCli(['check', '--json'], { env: cliEnv(l40s(quirk, 0)) });
      expect(logText(run.stderr)).not.toMatch(/implausible/);
      expect(run.code).toBe(0);
      const gpu = (parseJsonOutput(run).gpus as Array<Record<string, unknown>>)[0];
      expect(gpu).toMatchObject({ reservedInUsed: quirk, usedBytes: quirk ? 569 * MiB : 0, reservedBytes: 569 * MiB, ok: true });
      const status = parseJsonOutput(await runCli(['status', '--json'], { env: cliEnv(l40s(quirk, 0)) }));
      expect((status.devices as Array<{ memory: Record<string, unknown> }>)[0]?.memory).toMatchObject({ source: 'v2', reservedInUsed: quirk });
    }
  });

  it('compares maxUsed with used excluding reserved, so the reservation never reads as a holder', async () => {
    // 900 MiB in use by a process: under the 1 GiB default once reserved is not counted (1469 MiB with it).
    const free = await runCli(['check', '--max-used', '1GiB', '--json'], { env: cliEnv(l40s(true, 900 * MiB)) });
    expect(free.code).toBe(0);
    // 1200 MiB is over: the reason shows the figure that was compared.
    const busy = await runCli(['check', '--max-used', '1GiB', '--json'], { env: cliEnv(l40s(true, 1200 * MiB)) });
    expect(parseJsonOutput(busy).result).toBe('busy');
    expect(logText(busy.stderr)).toMatch(/used 1\.2GiB \(reserved not counted\) > allowed 1GiB/);
  });
});

describe('a gate that selects no GPU', () => {
  const busy = (): string =>
    writeScenario({ devices: [simDevice(0, { memory: { totalBytes: TOTAL, reservedBytes: 0, usedBytes: 90 * GiB } }), simDevice(1, { memory: { totalBytes: TOTAL, reservedBytes: 0, usedBytes: 90 * GiB } })] });

  for (const [name, value] of [
    ['CUDA_VISIBLE_DEVICES', ''],
    ['CUDA_VISIBLE_DEVICES', '-1'],
    ['NVIDIA_VISIBLE_DEVICES', 'none'],
    ['NVIDIA_VISIBLE_DEVICES', 'void'],
  ] as const) {
    it(`exits 78 from check and wait with ${name}=${JSON.stringify(value)}, naming the variable`, async () => {
      const env = cliEnv(busy(), { [name]: value });
      const check = await runCli(['check', '--json'], { env });
      expect(check.code).toBe(78);
      expect(logText(check.stderr)).toContain(`${name}=${JSON.stringify(value)} selects no GPU`);
      expect(parseJsonOutput(check).result).toBe('config-error');
      const wait = await runCli(['wait', '--timeout', '10s', '--stable', '0s'], { env });
      expect(wait.code).toBe(78);
      expect(logText(wait.stderr)).toContain(`${name}=${JSON.stringify(value)} selects no GPU`);
    });
  }

  it('succeeds on an empty selection only with --allow-empty', async () => {
    const env = cliEnv(busy(), { CUDA_VISIBLE_DEVICES: '-1' });
    const allowed = await runCli(['check', '--allow-empty'], { env });
    expect(allowed.code).toBe(0);
    const emptyList = await runCli(['check', '--gpus', ',', '--allow-empty'], { env: cliEnv(busy()) });
    expect(emptyList.code).toBe(0);
    const refused = await runCli(['check', '--gpus', ','], { env: cliEnv(busy()) });
    expect(refused.code).toBe(78);
    expect(logText(refused.stderr)).toMatch(/--allow-empty/);
  });
});

describe('the library refuses an empty selection the same way', () => {
  it('waitForGpusFree({ gpus: [] }) and checkGpusOnce reject with a DeviceSelectionError unless allowEmptySelection', async () => {
    useScenario({ devices: [simDevice(0, { memory: { totalBytes: TOTAL, reservedBytes: 0, usedBytes: 90 * GiB } })] });
    const libraryPath = freshSimulator();
    const waited = await waitForGpusFree({ libraryPath, gpus: [], timeoutMs: 5000 }).catch((error: unknown) => error);
    expect(waited).toBeInstanceOf(DeviceSelectionError);
    expect((waited as Error).message).toMatch(/selector list "" selects no GPU/);
    const checked = await checkGpusOnce({ libraryPath, env: { NVIDIA_VISIBLE_DEVICES: 'void' } }).catch((error: unknown) => error);
    expect(checked).toBeInstanceOf(DeviceSelectionError);
    expect((checked as Error).message).toMatch(/NVIDIA_VISIBLE_DEVICES="void" selects no GPU/);
    const allowed = await waitForGpusFree({ libraryPath, gpus: [], allowEmptySelection: true, timeoutMs: 5000 });
    expect(allowed.devices).toEqual([]);
  });
});

describe('compute modes that admit no new CUDA context', () => {
  it('exits 75 from check on a prohibited GPU, naming the mode', async () => {
    const scenario = writeScenario({ devices: [simDevice(0, { computeMode: 'prohibited' }), simDevice(1)] });
    const run = await runCli(['check', '--json'], { env: cliEnv(scenario) });
    expect(run.code).toBe(75);
    expect(logText(run.stderr)).toMatch(/GPU 0 \([^)]*\): compute mode prohibited: no CUDA context can be created/);
    expect(logText(run.stderr)).toMatch(/busy gpu=0 .*why=compute-mode compute_mode=prohibited/);
    const gpus = parseJsonOutput(run).gpus as Array<{ index: number; ok: boolean; reasons: string[]; computeMode: string }>;
    expect(gpus.map((gpu) => [gpu.index, gpu.ok, gpu.reasons, gpu.computeMode])).toEqual([
      [0, false, ['compute-mode'], 'prohibited'],
      [1, true, [], 'default'],
    ]);
  });

  it('exits 75 on exclusive_process with a live holder, and 0 once nobody holds it', async () => {
    const pid = await spawnSleeper();
    const held = writeScenario({
      devices: [simDevice(0, { computeMode: 'exclusive_process', memory: { totalBytes: TOTAL, reservedBytes: 0, usedBytes: 256 * 2 ** 20 }, processes: [{ pid, usedBytes: 256 * 2 ** 20 }] })],
    });
    // The holder uses little memory: only the compute mode makes the GPU unusable.
    const run = await runCli(['check', '--max-used', '1GiB'], { env: cliEnv(held) });
    expect(run.code).toBe(75);
    expect(logText(run.stderr)).toMatch(/compute mode exclusive_process: one CUDA context at a time/);
    const idle = writeScenario({ devices: [simDevice(0, { computeMode: 'exclusive_process' })] });
    expect((await runCli(['check'], { env: cliEnv(idle) })).code).toBe(0);
  });
});

describe('a lost GPU selected by UUID', () => {
  it('exits 69 (unavailable), not 78, and names the GPU that cannot be identified', async () => {
    const env = cliEnv(bundledScenario('lost-gpu'));
    // GPU 5's UUID in scenarios/lost-gpu.json: the lost GPU answers nothing, so nothing matches it.
    const run = await runCli(['check', '--gpus', 'GPU-5b8c2f14-e3a9-4761-9d0b-7f4a6c1e8d39'], { env });
    expect(run.code).toBe(69);
    expect(logText(run.stderr)).toMatch(/matches no readable GPU, and GPU 5 \(NVML_ERROR_GPU_IS_LOST/);
    const byCuda = await runCli(['wait', '--timeout', '5s'], { env: { ...env, CUDA_VISIBLE_DEVICES: 'GPU-5b8c2f14-e3a9-4761-9d0b-7f4a6c1e8d39' } });
    expect(byCuda.code).toBe(69);
    // A UUID that cannot be the lost GPU's on a host where every GPU answers is still a configuration error.
    const healthy = writeScenario({ devices: [simDevice(0)] });
    const wrong = await runCli(['check', '--gpus', 'GPU-00000000-dead-beef-0000-000000000000'], { env: cliEnv(healthy) });
    expect(wrong.code).toBe(78);
  });
});
