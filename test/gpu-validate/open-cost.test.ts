/**
 * gpu-validate's open-cost step (scripts/gpu-validate/open-cost.cjs): what the NVML helper adds
 * to opening NVML, measured in probe processes that load the package as a program does. Run as
 * a subprocess against the simulator; against a gpugate without the helper (it skips); and with
 * nvmlInit stuck in the kernel (a write on a frozen filesystem), where an in-process probe cannot
 * die: the step fails within its budget, names the stuck call, and still exits by itself.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cliEnv } from '../helpers/cli';
import { frozenFsUnavailable, makeFrozenFs } from '../helpers/frozen-fs';
import { isAlive, threadStates, until } from '../helpers/processes';
import { killProcessesUsingScenario } from '../helpers/scenario-processes';
import { repoRoot, testTempDir, writeScenario } from '../helpers/sim';
import type { StepRecord } from '../helpers/gpu-validate-step';
import { matrixScenario } from '../reliability/helpers/fault-scenario';

const program = path.join(repoRoot(), 'scripts', 'gpu-validate', 'open-cost.cjs');
const cleanups: Array<() => Promise<void> | void> = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface StepRun {
  code: number | null;
  stdout: string;
  record: StepRecord;
  elapsedMs: number;
}

/** Runs the step program on `pkg` with `env`; resolves when it has exited, with the record it wrote. */
function runStep(pkg: string, env: NodeJS.ProcessEnv, budgetS: number): Promise<StepRun> {
  const out = path.join(fs.mkdtempSync(path.join(testTempDir(), 'open-cost-')), 'step.json');
  const started = performance.now();
  const child = spawn(process.execPath, [program, '--package', pkg, '--node', process.execPath, '--budget-s', String(budgetS), '--out', out], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  let stdout = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  return new Promise((resolve) => {
    child.once('exit', (code) => {
      const elapsedMs = performance.now() - started;
      resolve({ code, stdout, record: JSON.parse(fs.readFileSync(out, 'utf8')) as StepRecord, elapsedMs });
    });
  });
}

/** A package directory whose `openNvml` is `body` (a gpugate of another version). */
function fakePackage(body: string): string {
  const dir = fs.mkdtempSync(path.join(testTempDir(), 'open-cost-package-'));
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'gpugate', main: 'index.js' }));
  fs.writeFileSync(path.join(dir, 'index.js'), `exports.openNvml = ${body};\n`);
  return dir;
}

describe('the open-cost step', () => {
  it('measures both modes against the simulator, in fresh processes and repeated, and reports the added cost next to the goal', async () => {
    // 21 probe processes within a budget of 120 s (the test's own bound is above it): all ten pairs fit.
    const run = await runStep(repoRoot(), cliEnv(writeScenario(matrixScenario([]))), 120);
    expect(run.code, run.stdout).toBe(0);
    expect(run.record.status, run.record.summary).toBe('pass');
    const data = run.record.data as {
      goalMs: number;
      firstOpen: { pairs: number; helperMedianMs: number; inProcessMedianMs: number; addedMedianMs: number };
      repeatedOpen: { opens: number; helperMedianMs: number; inProcessMedianMs: number; addedMs: number };
    };
    expect(data.goalMs).toBe(5);
    expect(data.firstOpen.pairs).toBe(10);
    expect(data.firstOpen.helperMedianMs).toBeGreaterThan(0);
    expect(data.firstOpen.inProcessMedianMs).toBeGreaterThan(0);
    expect(data.repeatedOpen.opens).toBe(10);
    expect(data.repeatedOpen.addedMs).toBeCloseTo(data.repeatedOpen.helperMedianMs - data.repeatedOpen.inProcessMedianMs, 6);
    expect(run.record.summary).toMatch(/^the helper adds -?[\d.]+ ms to a first open \(goal <= 5 ms; medians of 10 pairs: [\d.]+ ms helper, [\d.]+ ms in-process\); repeated opens: [\d.]+ ms helper, [\d.]+ ms in-process, -?[\d.]+ ms added$/);
  }, 150_000);

  it('skips a gpugate whose openNvml has no nvmlProcess option, or ignores it (no helper process to compare)', async () => {
    const refuses = fakePackage(`async (options) => { const e = new Error("gpugate: openNvml(options): unknown option 'nvmlProcess'"); e.code = 'GPUGATE_CONFIG'; throw e; }`);
    const refused = await runStep(refuses, process.env, 60);
    expect(refused.code).toBe(0);
    expect(refused.record.status).toBe('skip');
    expect(refused.record.summary).toContain("skipped: this gpugate has no helper process to compare (gpugate: openNvml(options): unknown option 'nvmlProcess')");
    const ignores = fakePackage('async () => ({ close: async () => {} })');
    const ignored = await runStep(ignores, process.env, 60);
    expect(ignored.code).toBe(0);
    expect(ignored.record.status).toBe('skip');
    expect(ignored.record.summary).toBe("skipped: this gpugate's nvmlProcess option does not choose a helper process (gpugate-nvml-helper children while open: 0 in the helper mode, 0 in-process)");
  });

  it('fails, naming the failure, when opening NVML fails', async () => {
    const env = cliEnv(writeScenario(matrixScenario([{ function: 'nvmlInit_v2', return: 9 }])));
    const run = await runStep(repoRoot(), env, 60);
    expect(run.code).toBe(0);
    expect(run.record.status).toBe('fail');
    expect(run.record.summary).toMatch(/^every probe opened NVML: openNvml\(\{ nvmlProcess: 'in-process' \}\) failed: .*NVML_ERROR_DRIVER_NOT_LOADED/);
  });

  const unavailable = frozenFsUnavailable();
  it.skipIf(unavailable !== null)(`nvmlInit stuck in the kernel: fails within its budget naming it, and exits while the probe stays in D${unavailable === null ? '' : ` (skipped: ${unavailable})`}`, async () => {
    const mounted = makeFrozenFs();
    const blockFile = path.join(mounted.path, 'nvml-call');
    fs.writeFileSync(blockFile, '');
    const scenario = writeScenario(matrixScenario([{ function: 'nvmlInit_v2', kernelBlock: blockFile }]));
    cleanups.push(async () => {
      try {
        if (mounted.frozen) mounted.thaw();
        await killProcessesUsingScenario(scenario, blockFile);
      } finally {
        mounted.dispose();
      }
    });
    mounted.freeze();
    const budgetS = 3;
    const run = await runStep(repoRoot(), cliEnv(scenario), budgetS);
    expect(run.code).toBe(0);
    expect(run.record.status).toBe('fail');
    expect(run.record.summary).toMatch(/^every probe opened NVML: open-probe first in-process \(pid (\d+)\) did not finish within 3000 ms; it did not end after SIGKILL \(a thread in state D\): an NVML call is stuck in the kernel$/);
    // The budget, the kill's grace and a process start or two: not the probe's end, which waits for the thaw.
    expect(run.elapsedMs).toBeLessThan(budgetS * 1000 + 2000 + 10_000);
    const probe = Number(/\(pid (\d+)\)/.exec(run.record.summary)![1]);
    expect(threadStates(probe)).toContain('D');
    mounted.thaw();
    // Its SIGKILL is pending: the write returns at the thaw, and the probe ends.
    await until(`the stuck probe ${probe} to end after the thaw`, () => !isAlive(probe), 20_000);
  }, 60_000);
});
