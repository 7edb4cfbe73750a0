/**
 * `gpugate bench` as users run it: the built CLI as a subprocess, against the simulator, with a
 * compiled nvidia-smi stand-in put on the PATH.
 */
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliEntry, repoRoot, simulatorLibrary } from '../../bench/paths';
import { writeBenchScenario } from '../../bench/scenarios';

const run = promisify(execFile);

describe('gpugate bench (CLI)', () => {
  let dir = '';
  let env: NodeJS.ProcessEnv = {};

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpugate-bench-cli-'));
    const bin = path.join(dir, 'bin');
    fs.mkdirSync(bin);
    const root = repoRoot();
    await run('cc', ['-O2', '-I', path.join(root, 'native'), '-o', path.join(bin, 'nvidia-smi'), path.join(root, 'scripts', 'gpu-validate', 'nvidia-smi-standin.c'), '-ldl']);
    env = {
      ...process.env,
      PATH: `${bin}${path.delimiter}${process.env['PATH'] ?? ''}`,
      GPUGATE_NVML_LIBRARY: simulatorLibrary(),
      GPUGATE_SIM_SCENARIO: writeBenchScenario(dir, { devices: 8, processesPerDevice: 2 }),
    };
  });

  afterAll(() => {
    if (dir !== '') fs.rmSync(dir, { recursive: true, force: true });
  });

  it('prints gpugate\'s figures, the stand-in nvidia-smi\'s figures and the ratio', async () => {
    const { stdout } = await run(process.execPath, [cliEntry(), 'bench', '--iterations', '10'], { env });
    expect(stdout).toContain('gpugate bench: 8 GPU(s)');
    expect(stdout).toMatch(/gpugate snapshot, memory only\s+10\s/);
    expect(stdout).toMatch(/gpugate snapshot, with processes\s+10\s/);
    expect(stdout).toMatch(/nvidia-smi --query-gpu=memory.used\s+10\s/);
    expect(stdout).toMatch(/ratio: one memory-only snapshot is [\d.]+× faster than one nvidia-smi run/);
  });

  it('prints one JSON object with --json', async () => {
    const { stdout } = await run(process.execPath, [cliEntry(), 'bench', '--iterations', '5', '--json'], { env });
    const result = JSON.parse(stdout) as { deviceCount: number; nvidiaSmi: { perRun: { samples: number } } | null; speedupVsNvidiaSmi: number | null };
    expect(result.deviceCount).toBe(8);
    expect(result.nvidiaSmi?.perRun.samples).toBe(5);
    expect(result.speedupVsNvidiaSmi).toBeGreaterThan(0);
  });

  it('is listed in gpugate --help and has its own --help page', async () => {
    const { stdout: top } = await run(process.execPath, [cliEntry(), '--help'], { env });
    expect(top).toMatch(/^  bench\s+/m);
    const { stdout: page } = await run(process.execPath, [cliEntry(), 'bench', '--help'], { env });
    expect(page).toContain('Usage: gpugate bench [options]');
    expect(page).toContain('--iterations N');
    expect(page).toContain('--duration DUR');
  });

  it('rejects a bad --iterations with exit 64 and a message naming it', async () => {
    await expect(run(process.execPath, [cliEntry(), 'bench', '--iterations', 'lots'], { env })).rejects.toMatchObject({
      code: 64,
      stderr: expect.stringContaining('--iterations'),
    });
  });
});
