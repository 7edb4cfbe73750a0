/**
 * The benchmark's C programs against the real simulator library: the C floor prints plausible
 * figures for every device, and the nvidia-smi stand-in prints the same CSV nvidia-smi does.
 */
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot, simulatorLibrary } from '../../bench/paths';
import { benchScenario, writeBenchScenario } from '../../bench/scenarios';

const run = promisify(execFile);
const root = repoRoot();
let dir = '';
let floor = '';
let standin = '';

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpugate-bench-c-'));
  floor = path.join(dir, 'floor');
  standin = path.join(dir, 'nvidia-smi');
  const include = path.join(root, 'native');
  await run('cc', ['-O2', '-I', include, '-o', floor, path.join(root, 'bench', 'c', 'floor.c'), '-ldl']);
  await run('cc', ['-O2', '-I', include, '-o', standin, path.join(root, 'scripts', 'gpu-validate', 'nvidia-smi-standin.c'), '-ldl']);
});

afterAll(() => {
  if (dir !== '') fs.rmSync(dir, { recursive: true, force: true });
});

function simEnv(scenario: string): NodeJS.ProcessEnv {
  return { ...process.env, GPUGATE_NVML_LIBRARY: simulatorLibrary(), GPUGATE_SIM_SCENARIO: scenario };
}

describe('nvidia-smi stand-in', () => {
  it('prints one memory.used line in MiB per simulated GPU, like nvidia-smi --format=csv,noheader,nounits', async () => {
    const scenario = writeBenchScenario(dir, { devices: 3, processesPerDevice: 2 });
    const { stdout } = await run(standin, ['--query-gpu=memory.used', '--format=csv,noheader,nounits'], { env: simEnv(scenario) });
    // Each bench GPU holds 2 GiB per process: 2 processes = 4096 MiB used (v2: reserved excluded).
    expect(stdout).toBe('4096\n4096\n4096\n');
  });

  it('answers several fields in the order asked, as nvidia-smi does', async () => {
    const scenario = writeBenchScenario(dir, { devices: 2, processesPerDevice: 0 });
    const { stdout } = await run(standin, ['--query-gpu=index,memory.used,memory.total', '--format=csv,noheader,nounits'], { env: simEnv(scenario) });
    const totalMiB = Math.floor((benchScenario({ devices: 1, processesPerDevice: 0 }) as { devices: Array<{ memory: { totalBytes: number } }> }).devices[0]!.memory.totalBytes / 2 ** 20);
    expect(stdout).toBe(`0, 0, ${totalMiB}\n1, 0, ${totalMiB}\n`);
  });

  it('rejects a query it does not understand with exit 2 and a usage line', async () => {
    const scenario = writeBenchScenario(dir, { devices: 1, processesPerDevice: 0 });
    await expect(run(standin, ['--query-gpu=clocks.sm', '--format=csv,noheader,nounits'], { env: simEnv(scenario) })).rejects.toMatchObject({
      code: 2,
      stderr: expect.stringContaining('Field "clocks.sm" is not a valid field to query.'),
    });
  });

  it('reports a library that cannot be loaded instead of crashing', async () => {
    const env = { ...process.env, GPUGATE_NVML_LIBRARY: path.join(dir, 'no-such-libnvidia-ml.so.1') };
    await expect(run(standin, ['--query-gpu=memory.used', '--format=csv,noheader,nounits'], { env })).rejects.toMatchObject({
      code: 9,
      stderr: expect.stringContaining('no-such-libnvidia-ml.so.1'),
    });
  });
});

describe('C floor', () => {
  it.each([
    ['memory', 8, 0],
    ['processes', 4, 8],
  ] as const)('loops the %s calls of every device and prints its figures as JSON (%i GPUs × %i processes)', async (mode, devices, processesPerDevice) => {
    const scenario = writeBenchScenario(dir, { devices, processesPerDevice });
    const { stdout } = await run(floor, [simulatorLibrary(), mode, '20', '2000'], { env: simEnv(scenario) });
    const result = JSON.parse(stdout) as { mode: string; devices: number; samples: number; batch: number; perSnapshotNs: Record<string, number>; memoryReadNs: number };
    expect(result).toMatchObject({ mode, devices, samples: 20 });
    expect(result.batch).toBeGreaterThanOrEqual(1);
    const { median, p99, max } = result.perSnapshotNs as { median: number; p99: number; max: number };
    expect(median).toBeGreaterThan(0);
    expect(p99).toBeGreaterThanOrEqual(median);
    expect(max).toBeGreaterThanOrEqual(p99);
    expect(result.memoryReadNs).toBeGreaterThan(0);
  });

  it('fails with a clear message when the library cannot be loaded', async () => {
    const scenario = writeBenchScenario(dir, { devices: 1, processesPerDevice: 0 });
    await expect(run(floor, [path.join(dir, 'missing.so'), 'memory', '5'], { env: simEnv(scenario) })).rejects.toMatchObject({
      code: 3,
      stderr: expect.stringContaining('cannot load'),
    });
  });

  it('rejects an unknown mode with its usage line', async () => {
    await expect(run(floor, [simulatorLibrary(), 'clocks', '5'])).rejects.toMatchObject({ code: 2, stderr: expect.stringContaining('usage: floor') });
  });
});
