/**
 * NVML calls that never return (the simulator's `hang` fault) at the three places gpugate can
 * meet one: nvmlInit, a memory read, a process list. The library rejects at its deadline while
 * the event loop keeps serving timers; `gpugate wait --nvml-timeout 1s` exits 69 within about
 * two seconds; and processes that import gpugate (or are left with a stuck NVML thread) still
 * exit by themselves.
 */
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { openNvml } from '../../src/nvml/session';
import { cliEnv, runCli } from '../helpers/cli';
import { repoRoot, writeScenario } from '../helpers/sim';
import { freshSimulator } from '../helpers/session-helpers';
import { matrixScenario, type SimFault } from './helpers/fault-scenario';

const DEADLINE_MS = 400;
/** Generous upper bound for "promptly" on a loaded 2-core machine. */
const PROMPT_MS = 5000;

const HANG_POINTS: Array<{ name: string; fault: SimFault; processes: boolean }> = [
  { name: 'nvmlInit', fault: { function: 'nvmlInit_v2', hang: true }, processes: false },
  { name: 'a memory read', fault: { function: 'nvmlDeviceGetMemoryInfo_v2', device: 1, hang: true }, processes: false },
  { name: 'a process list', fault: { function: 'nvmlDeviceGetComputeRunningProcesses_v3', device: 1, hang: true }, processes: true },
];

/** Counts timer ticks while `body` runs; returns the ticks and the longest gap between two. */
async function withTicker<T>(body: () => Promise<T>): Promise<{ result: PromiseSettledResult<T>; ticks: number; maxGapMs: number; elapsedMs: number }> {
  let ticks = 0;
  let last = performance.now();
  let maxGapMs = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    maxGapMs = Math.max(maxGapMs, now - last);
    last = now;
    ticks += 1;
  }, 10);
  const started = performance.now();
  const [result] = await Promise.allSettled([body()]);
  const elapsedMs = performance.now() - started;
  clearInterval(timer);
  return { result: result!, ticks, maxGapMs, elapsedMs };
}

describe('a hung NVML call in the library', () => {
  it.each(HANG_POINTS)('$name: rejects with GPUGATE_TIMEOUT at the deadline while timers keep firing', async ({ name, fault, processes }) => {
    const libraryPath = freshSimulator();
    process.env['GPUGATE_SIM_SCENARIO'] = writeScenario(matrixScenario([fault]));
    const { result, ticks, maxGapMs, elapsedMs } = await withTicker(async () => {
      const session = await openNvml({ libraryPath, callTimeoutMs: DEADLINE_MS });
      try {
        return await session.snapshot({ processes });
      } finally {
        expect(session.closed).toBe(true); // poisoned by the hang (or never opened)
      }
    });
    expect(result.status, name).toBe('rejected');
    const reason = (result as PromiseRejectedResult).reason as { name?: string; code?: string; message?: string };
    expect(reason).toMatchObject({ name: 'NvmlError', code: 'GPUGATE_TIMEOUT' });
    expect(reason.message).toContain(`${DEADLINE_MS} ms`);
    expect(elapsedMs).toBeGreaterThanOrEqual(DEADLINE_MS - 5);
    expect(elapsedMs).toBeLessThan(PROMPT_MS);
    expect(ticks).toBeGreaterThanOrEqual(3);
    expect(maxGapMs).toBeLessThan(DEADLINE_MS + 1000); // the JS thread was never blocked by the hang
  });

  it('a poisoned session answers every later call at once with the reason, and close() resolves', async () => {
    const libraryPath = freshSimulator();
    process.env['GPUGATE_SIM_SCENARIO'] = writeScenario(matrixScenario([{ function: 'nvmlDeviceGetMemoryInfo_v2', hang: true }]));
    const session = await openNvml({ libraryPath, callTimeoutMs: DEADLINE_MS });
    await expect(session.snapshot()).rejects.toMatchObject({ code: 'GPUGATE_TIMEOUT' });
    const started = performance.now();
    await expect(session.snapshot()).rejects.toMatchObject({ code: 'GPUGATE_SESSION_CLOSED', message: expect.stringContaining('earlier NVML call missed its deadline') });
    expect(() => session.snapshotSync()).toThrow(/earlier NVML call missed its deadline/);
    expect(() => session.readMemorySync()).toThrow(/earlier NVML call missed its deadline/);
    await session.close();
    expect(performance.now() - started).toBeLessThan(PROMPT_MS);
  });

  it('a blocking read queued behind a hung call gives up after the deadline instead of freezing the thread', async () => {
    const libraryPath = freshSimulator();
    process.env['GPUGATE_SIM_SCENARIO'] = writeScenario(matrixScenario([{ function: 'nvmlDeviceGetMemoryInfo_v2', hang: true }]));
    const session = await openNvml({ libraryPath, callTimeoutMs: DEADLINE_MS });
    const pending = session.snapshot();
    pending.catch(() => undefined);
    await new Promise((resolve) => setTimeout(resolve, 50)); // the worker is now inside the hung call
    const started = performance.now();
    expect(() => session.readMemorySync()).toThrow(expect.objectContaining({ code: 'GPUGATE_TIMEOUT' }) as Error);
    expect(performance.now() - started).toBeLessThan(PROMPT_MS);
    await expect(pending).rejects.toMatchObject({ code: 'GPUGATE_TIMEOUT' });
    await session.close();
  });
});

describe('a hung NVML call in the gpugate command', () => {
  it.each(HANG_POINTS)('$name: `wait --nvml-timeout 1s` exits 69 within about two seconds, well below the default 10 s', async ({ fault }) => {
    const scenario = writeScenario(matrixScenario([fault]));
    const run = await runCli(['wait', '--nvml-timeout', '1s', '--timeout', '60s', '--stable', '0s', '--interval', '100ms', '--stale', 'ignore'], {
      env: cliEnv(scenario),
      killAfterMs: 30_000,
    });
    expect(run.code, run.stderr).toBe(69);
    expect(run.stderr).toMatch(/did not answer within 1000 ms|NVML did not answer|stuck/);
    expect(run.stderr).not.toMatch(/internal error|\n\s+at /);
    // 1 s deadline + startup; generous for a loaded machine, but far from the 10 s default.
    expect(run.elapsedMs).toBeLessThan(7000);
  });
});

/** Runs `node -e SCRIPT` from the repository root; resolves with its exit and elapsed time. */
function runNode(script: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string; elapsedMs: number }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(process.execPath, ['-e', script], { cwd: repoRoot(), env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const killer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.once('error', reject);
    child.once('close', (code, signal) => {
      clearTimeout(killer);
      resolve({ code, signal, stdout, stderr, elapsedMs: performance.now() - started });
    });
  });
}

describe('process exit', () => {
  const entry = JSON.stringify(path.join(repoRoot(), 'dist', 'index.js'));

  it('a process that only imports gpugate exits normally and quickly', async () => {
    const run = await runNode(`require(${entry}); console.log('imported');`, cliEnv(null));
    expect(run).toMatchObject({ code: 0, signal: null, stdout: 'imported\n' });
    expect(run.elapsedMs).toBeLessThan(PROMPT_MS);
  });

  it('a process that opened a session and never closed it exits normally', async () => {
    const scenario = writeScenario(matrixScenario([]));
    const script = `const g = require(${entry}); g.openNvml().then((s) => s.snapshot({ processes: true })).then((snap) => console.log(snap.devices.length));`;
    const run = await runNode(script, cliEnv(scenario));
    expect(run).toMatchObject({ code: 0, signal: null, stdout: '3\n' });
    expect(run.elapsedMs).toBeLessThan(PROMPT_MS);
  });

  it('a process left with an NVML thread stuck in a hung call exits once its JavaScript is done', async () => {
    const scenario = writeScenario(matrixScenario([{ function: 'nvmlDeviceGetMemoryInfo_v2', hang: true }]));
    const script =
      `const g = require(${entry}); g.openNvml({ callTimeoutMs: 300 }).then((s) => s.snapshot())` +
      `.catch((e) => console.log(e.code));`;
    const run = await runNode(script, cliEnv(scenario));
    expect(run).toMatchObject({ code: 0, signal: null, stdout: 'GPUGATE_TIMEOUT\n' });
    expect(run.elapsedMs).toBeLessThan(PROMPT_MS);
  });
});
