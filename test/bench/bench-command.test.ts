/**
 * `gpugate bench`: its measuring part (src/bench/run-bench.ts), its table (src/cli/bench-text.ts) and its
 * flags (src/cli/commands/bench-command.ts) through the real addon, real dlopen and the
 * simulator, with a real (compiled) nvidia-smi stand-in put on the PATH. Pins what it reports and
 * that it is read-only and bounded; never asserts how fast anything is.
 */
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot, simulatorLibrary } from '../../bench/paths';
import { writeBenchScenario } from '../../bench/scenarios';
import { findOnPath, runBench } from '../../src/bench/run-bench';
import { formatBenchResult } from '../../src/cli/bench-text';
import { runBenchCommand } from '../../src/cli/commands/bench-command';
import { UsageError } from '../../src/usage-error';

const run = promisify(execFile);
let dir = '';
let smiDir = '';
let scenario = '';
let statsFile = '';

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpugate-bench-cmd-'));
  smiDir = path.join(dir, 'bin');
  fs.mkdirSync(smiDir);
  const root = repoRoot();
  await run('cc', ['-O2', '-I', path.join(root, 'native'), '-o', path.join(smiDir, 'nvidia-smi'), path.join(root, 'scripts', 'gpu-validate', 'nvidia-smi-standin.c'), '-ldl']);
  scenario = writeBenchScenario(dir, { devices: 4, processesPerDevice: 2 });
  statsFile = path.join(dir, 'stats.json');
  // The addon reads the simulator through GPUGATE_NVML_LIBRARY, like users point it at a driver.
  process.env['GPUGATE_NVML_LIBRARY'] = simulatorLibrary();
  process.env['GPUGATE_SIM_SCENARIO'] = scenario;
  process.env['GPUGATE_SIM_STATS'] = statsFile;
});

afterAll(() => {
  if (dir !== '') fs.rmSync(dir, { recursive: true, force: true });
});

function envWithPath(pathVariable: string): NodeJS.ProcessEnv {
  return { ...process.env, PATH: pathVariable };
}

describe('runBench', () => {
  it('measures gpugate and the nvidia-smi found on PATH the same number of times, and prints both with the ratio', async () => {
    const env = envWithPath(`${smiDir}${path.delimiter}${process.env['PATH'] ?? ''}`);
    const result = await runBench({ iterations: 15, durationMs: 60_000, env });
    expect(result.deviceCount).toBe(4);
    expect(result.libraryPath).toContain('gpugate_sim');
    expect(result.memoryOnly.perSnapshot.samples).toBe(15);
    expect(result.withProcesses.perSnapshot.samples).toBe(15);
    expect(result.nvidiaSmi).toMatchObject({ path: path.join(smiDir, 'nvidia-smi'), error: null });
    expect(result.nvidiaSmi?.perRun?.samples).toBe(15);
    expect(result.stoppedByDuration).toBe(false);
    for (const stats of [result.memoryOnly.perSnapshot, result.withProcesses.perSnapshot, result.nvidiaSmi!.perRun!]) {
      expect(stats.medianUs).toBeGreaterThan(0);
      expect(stats.p99Us).toBeGreaterThanOrEqual(stats.medianUs);
      expect(stats.maxUs).toBeGreaterThanOrEqual(stats.p99Us);
    }
    // Per device is per snapshot split over the 4 GPUs.
    expect(result.memoryOnly.perDevice!.medianUs).toBeCloseTo(result.memoryOnly.perSnapshot.medianUs / 4, 6);
    expect(result.speedupVsNvidiaSmi).toBeCloseTo(result.nvidiaSmi!.perRun!.medianUs / result.memoryOnly.perSnapshot.medianUs, 6);

    const text = formatBenchResult(result);
    expect(text).toContain('gpugate bench: 4 GPU(s)');
    expect(text).toMatch(/gpugate snapshot, memory only\s+15\s/);
    expect(text).toMatch(/gpugate snapshot, with processes\s+15\s/);
    expect(text).toMatch(/nvidia-smi --query-gpu=memory.used\s+15\s/);
    expect(text).toMatch(/ratio: one memory-only snapshot is [\d.]+× faster than one nvidia-smi run/);
  });

  it('says there is no comparison when nvidia-smi is not on PATH', async () => {
    const env = envWithPath(path.join(dir, 'empty-path-dir'));
    const result = await runBench({ iterations: 5, env });
    expect(result.nvidiaSmi).toBeNull();
    expect(result.speedupVsNvidiaSmi).toBeNull();
    expect(formatBenchResult(result)).toContain('nvidia-smi: not found on PATH');
  });

  it('reports a failing nvidia-smi instead of throwing', async () => {
    const broken = path.join(dir, 'broken-smi');
    fs.writeFileSync(broken, '#!/bin/sh\necho "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver" >&2\nexit 9\n', { mode: 0o755 });
    const result = await runBench({ iterations: 3, nvidiaSmiPath: broken });
    expect(result.nvidiaSmi).toMatchObject({ path: broken, perRun: null });
    expect(result.nvidiaSmi?.error).toContain('could not communicate with the NVIDIA driver');
    expect(result.speedupVsNvidiaSmi).toBeNull();
    expect(formatBenchResult(result)).toContain('nvidia-smi: ');
  });

  it('stops at the duration limit and says so, even with a huge iteration count', async () => {
    const result = await runBench({ iterations: 10_000_000, durationMs: 300, nvidiaSmiPath: null });
    expect(result.stoppedByDuration).toBe(true);
    expect(result.memoryOnly.perSnapshot.samples).toBeLessThan(10_000_000);
    expect(result.memoryOnly.perSnapshot.samples).toBeGreaterThanOrEqual(1);
    expect(formatBenchResult(result)).toContain('stopped early at the 0.3 s limit');
  });

  it('only reads: every NVML function it made the simulator answer is a query', async () => {
    fs.rmSync(statsFile, { force: true });
    await runBench({ iterations: 5, nvidiaSmiPath: null });
    const stats = JSON.parse(fs.readFileSync(statsFile, 'utf8')) as { calls: Record<string, number> };
    const called = Object.entries(stats.calls).filter(([, n]) => n > 0).map(([name]) => name);
    expect(called).toContain('nvmlDeviceGetMemoryInfo_v2');
    const readOnly = /^(nvmlInit(_v2|WithFlags)?|nvmlShutdown|nvmlErrorString|nvml(System|Device)Get\w+)$/;
    expect(called.filter((name) => !readOnly.test(name))).toEqual([]);
  });

  it.each([
    [{ iterations: 0 }, 'iterations 0'],
    [{ iterations: 2.5 }, 'iterations 2.5'],
    [{ durationMs: -1 }, 'durationMs -1'],
    [{ durationMs: Number.NaN }, 'durationMs NaN'],
  ])('rejects %j with a UsageError naming the option', async (options, named) => {
    const attempt = runBench({ ...options, nvidiaSmiPath: null });
    await expect(attempt).rejects.toBeInstanceOf(UsageError);
    await expect(attempt).rejects.toThrow(named);
  });
});

describe('findOnPath', () => {
  it('finds an executable file and skips directories, non-executables and empty entries', () => {
    const a = path.join(dir, 'path-a');
    const b = path.join(dir, 'path-b');
    fs.mkdirSync(path.join(a, 'tool'), { recursive: true });
    fs.mkdirSync(b, { recursive: true });
    fs.writeFileSync(path.join(b, 'tool'), 'not executable', { mode: 0o644 });
    expect(findOnPath('tool', `${a}${path.delimiter}${path.delimiter}${b}`)).toBeNull();
    fs.chmodSync(path.join(b, 'tool'), 0o755);
    expect(findOnPath('tool', `${a}${path.delimiter}${b}`)).toBe(path.join(b, 'tool'));
    expect(findOnPath('tool', undefined)).toBeNull();
  });
});

describe('runBenchCommand (what `gpugate bench` runs)', () => {
  function sink(): { text: string; write(chunk: string): void } {
    return { text: '', write(chunk: string) { this.text += chunk; } };
  }

  it('prints the table with both numbers and the ratio when nvidia-smi is on PATH', async () => {
    const out = sink();
    const env = envWithPath(`${smiDir}${path.delimiter}${process.env['PATH'] ?? ''}`);
    const code = await runBenchCommand({ iterations: '8', duration: '30s' }, out, env);
    expect(code).toBe(0);
    expect(out.text).toMatch(/gpugate snapshot, memory only\s+8\s/);
    expect(out.text).toMatch(/nvidia-smi --query-gpu=memory.used\s+8\s/);
    expect(out.text).toMatch(/ratio: one memory-only snapshot is [\d.]+× faster/);
  });

  it('prints one JSON object with --json', async () => {
    const out = sink();
    const code = await runBenchCommand({ iterations: '4', json: true, library: simulatorLibrary() }, out, envWithPath(path.join(dir, 'empty-path-dir')));
    expect(code).toBe(0);
    const parsed = JSON.parse(out.text) as Record<string, unknown>;
    expect(parsed).toMatchObject({ command: 'bench', result: 'ok', exitCode: 0, deviceCount: 4, nvidiaSmi: null, iterations: 4 });
    expect(out.text.trim().split('\n')).toHaveLength(1);
  });

  it.each([
    [{ iterations: '0' }, '--iterations "0"'],
    [{ iterations: 'many' }, '--iterations "many"'],
    [{ iterations: '1.5' }, '--iterations "1.5"'],
    [{ duration: '5' }, '--duration'],
    [{ duration: '0' }, '--duration "0"'],
    [{ 'nvml-timeout': 'soon' }, '--nvml-timeout'],
  ])('rejects %j with a UsageError naming the flag, before touching NVML', async (values, named) => {
    const out = sink();
    const attempt = runBenchCommand(values, out, envWithPath(''));
    await expect(attempt).rejects.toBeInstanceOf(UsageError);
    await expect(attempt).rejects.toThrow(named);
    expect(out.text).toBe('');
  });
});
