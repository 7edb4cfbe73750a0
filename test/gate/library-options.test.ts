/**
 * The package's options objects, through the public API, the real addon and the NVML simulator:
 * every function that takes options rejects a key it does not know (naming the function, the key
 * and the nearest known one) before it opens NVML or reads /proc; minFree takes the CLI's forms
 * with the CLI's answers; and one set of defaults (gateDefaults) is what gate(),
 * waitForGpusFree() and the CLI apply, the timeout among them.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  checkGpusOnce,
  ConfigError,
  gate,
  gateDefaults,
  GpuWaitAbortError,
  GpuWaitTimeoutError,
  inspectHolders,
  openNvml,
  runBench,
  runDoctor,
  selectGpus,
  UsageError,
  waitForGpusFree,
  type Evaluation,
} from '../../src/index';
// The constants the defaults object is checked against live behind the public surface.
import { DEFAULT_INTERVAL_MS, DEFAULT_KILL_GRACE_MS, DEFAULT_STABLE_MS, DEFAULT_TIMEOUT_MS } from '../../src/gate/gate-defaults';
import { DEFAULT_STABLE_TOLERANCE_BYTES } from '../../src/gate/criteria';
import { DEFAULT_CALL_TIMEOUT_MS } from '../../src/nvml/call-timeout';
import { formatBytes, formatDuration } from '../../src/units';
import { cliEnv, runCli } from '../helpers/cli';
import { simDevice, writeScenario } from '../helpers/sim';
import { freshSimulator, GiB, rtxProDevice, tempDir, useScenario } from '../helpers/session-helpers';

afterEach(() => {
  vi.useRealTimers();
  delete process.env['GPUGATE_SIM_SCENARIO'];
});

/** The rejection of `promise`, which must reject. */
async function rejectionOf(promise: Promise<unknown>): Promise<Error> {
  const settled = await promise.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  if (!('error' in settled)) throw new Error(`expected a rejection, got ${JSON.stringify(settled.value)}`);
  expect(settled.error).toBeInstanceOf(Error);
  return settled.error as Error;
}

/** Expects a ConfigError (GPUGATE_CONFIG) for the unknown `key` of `fn`, suggesting `nearest` (or nothing). */
function expectUnknownKey(error: Error, fn: string, key: string, nearest: string | null): void {
  expect(error).toBeInstanceOf(ConfigError);
  expect((error as ConfigError).code).toBe('GPUGATE_CONFIG');
  expect((error as ConfigError).option).toBe(key);
  expect(error.message).toContain(`${fn}(options): unknown option "${key}"`);
  if (nearest === null) expect(error.message).not.toContain('did you mean');
  else expect(error.message).toContain(`did you mean ${nearest}?`);
}

describe('unknown option keys', () => {
  it("the issue's three: { gpu: [0] } and { timeout: 1000 } to waitForGpusFree, openNvml({ libraryPth })", async () => {
    // A library that does not exist: a check that came after opening NVML would report that instead.
    const missing = `${tempDir()}/no-such-libnvidia-ml.so.1`;
    expectUnknownKey(await rejectionOf(waitForGpusFree({ libraryPath: missing, gpu: [0] } as never)), 'waitForGpusFree', 'gpu', 'gpus');
    expectUnknownKey(await rejectionOf(waitForGpusFree({ libraryPath: missing, timeout: 1000 } as never)), 'waitForGpusFree', 'timeout', 'timeoutMs');
    expectUnknownKey(await rejectionOf(openNvml({ libraryPth: freshSimulator() } as never)), 'openNvml', 'libraryPth', 'libraryPath');
  });

  it('every public function that takes options rejects an unknown key before doing anything', async () => {
    const missing = `${tempDir()}/no-such-libnvidia-ml.so.1`;
    const emptySnapshot = { takenAt: Date.now(), devices: [] };
    const cases: Array<[string, () => Promise<unknown>, string, string | null]> = [
      ['gate', () => gate({ libraryPath: missing, stableMS: 0 } as never), 'stableMS', 'stableMs'],
      ['gate', () => gate({ libraryPath: missing, mode: 'check', killstale: true } as never), 'killstale', 'killStale'],
      ['checkGpusOnce', () => checkGpusOnce({ libraryPath: missing, minfree: 0.5 } as never), 'minfree', 'minFree'],
      ['waitForGpusFree', () => waitForGpusFree({ libraryPath: missing, colour: 'red' } as never), 'colour', null],
      // gate()'s own keys are not a wait's.
      ['waitForGpusFree', () => waitForGpusFree({ libraryPath: missing, killStale: true } as never), 'killStale', null],
      ['selectGpus', () => selectGpus({ libraryPath: missing, count: 1, leaseDuration: 60_000 } as never), 'leaseDuration', 'leaseDurationMs'],
      ['selectGpus', () => selectGpus({ libraryPath: missing, count: 1, allowEmptySelection: true } as never), 'allowEmptySelection', null],
      ['openNvml', () => openNvml({ callTimeout: 1000 } as never), 'callTimeout', 'callTimeoutMs'],
      ['inspectHolders', () => inspectHolders(emptySnapshot, { procroot: '/proc' } as never), 'procroot', 'procRoot'],
      ['runDoctor', () => runDoctor({ libraryPath: missing, kernelLog: '/dev/null' } as never), 'kernelLog', 'kernelLogPath'],
      ['runBench', () => runBench({ libraryPath: missing, iteration: 5 } as never), 'iteration', 'iterations'],
    ];
    for (const [fn, call, key, nearest] of cases) expectUnknownKey(await rejectionOf(call()), fn, key, nearest);
  });

  it('the options inside the inspectHolders option are checked by the same table as inspectHolders()', async () => {
    const missing = `${tempDir()}/no-such-libnvidia-ml.so.1`;
    for (const call of [
      () => waitForGpusFree({ libraryPath: missing, inspectHolders: { unitCgrup: null } } as never),
      () => gate({ libraryPath: missing, inspectHolders: { unitCgrup: null } } as never),
      () => selectGpus({ libraryPath: missing, count: 1, inspectHolders: { unitCgrup: null } } as never),
    ]) {
      const error = await rejectionOf(call());
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).option).toBe('unitCgrup');
      expect(error.message).toContain('option inspectHolders: unknown option "unitCgrup"; did you mean unitCgroup?');
    }
  });

  it('the known keys still work, and an undefined value counts as absent', async () => {
    useScenario({ devices: [rtxProDevice(0, 0)] });
    const evaluation = await checkGpusOnce({ libraryPath: freshSimulator(), env: {}, timeoutMs: undefined, minFree: { fraction: 0.5 } } as never);
    expect(evaluation.devices.map((gpu) => [gpu.index, gpu.ok])).toEqual([[0, true]]);
  });
});

describe('minFree in the forms the CLI takes', () => {
  it('0.9, "0.9" and "90%" need what { fraction: 0.9 } needs; "86GiB" what { bytes } does', async () => {
    useScenario({ devices: [rtxProDevice(0, 0)] });
    const libraryPath = freshSimulator();
    const neededFor = async (minFree: unknown): Promise<number | null> =>
      (await checkGpusOnce({ libraryPath, env: {}, minFree } as never)).devices[0]?.neededFreeBytes ?? null;
    const fraction = await neededFor({ fraction: 0.9 });
    expect(fraction).toBe(Math.ceil(96 * GiB * 0.9));
    for (const form of [0.9, '0.9', '90%', ' 90% ']) expect(await neededFor(form), String(form)).toBe(fraction);
    expect(await neededFor('86GiB')).toBe(86 * GiB);
    expect(await neededFor({ bytes: 86 * GiB })).toBe(86 * GiB);
    // gate() takes them too, and judges by them: 86 GiB of 96 free passes, 97 GiB never could.
    const ready = await gate({ libraryPath, env: {}, mode: 'check', minFree: '86GiB' });
    expect(ready.result).toBe('ready');
    const never = await gate({ libraryPath, env: {}, mode: 'check', minFree: '97GiB' });
    expect(never.result).toBe('config-error');
    expect(never.reason).toContain('97GiB');
  });

  it('a bad value gets the class and code the CLI gives for the same text (78 config, 64 usage)', async () => {
    useScenario({ devices: [rtxProDevice(0, 0)] });
    const libraryPath = freshSimulator();
    // 1 and 100%: all memory free can never be met, a ConfigError as `--min-free 1` exits 78.
    for (const value of [1, '1', '100%']) {
      const error = await rejectionOf(waitForGpusFree({ libraryPath, env: {}, minFree: value }));
      expect(error, String(value)).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).code).toBe('GPUGATE_CONFIG');
      expect(error.message).toContain('minFree fraction 1 is out of range: expected above 0 and below 1');
      const outcome = await gate({ libraryPath, env: {}, minFree: value });
      expect(outcome.result).toBe('config-error');
      expect(outcome.error).toBeInstanceOf(ConfigError);
    }
    // A bare number above 1 is no size (a size needs a unit), and text that is no size: a UsageError, as the CLI's 64.
    for (const value of [4096, '4096', '86 GiBs', '']) {
      const error = await rejectionOf(checkGpusOnce({ libraryPath, env: {}, minFree: value }));
      expect(error, JSON.stringify(value)).toBeInstanceOf(UsageError);
      expect((error as UsageError).code).toBe('GPUGATE_USAGE');
      expect(error.message).toContain(`option minFree ${typeof value === 'number' ? value : JSON.stringify(value)}: invalid value`);
      await expect(gate({ libraryPath, env: {}, minFree: value })).rejects.toThrow(UsageError);
    }
    const bareNumber = await rejectionOf(checkGpusOnce({ libraryPath, env: {}, minFree: 4096 }));
    expect(bareNumber.message).toMatch(/a bare number is a fraction of total memory and must be at most 1; for a size write a unit/);
  });

  it('the CLI gives those same answers for the same text', async () => {
    const scenario = writeScenario({ devices: [simDevice(0)] });
    const config = await runCli(['check', '--min-free', '1'], { env: cliEnv(scenario) });
    expect(config.code, config.stderr).toBe(78);
    expect(config.stderr).toContain('minFree fraction 1 is out of range');
    const usage = await runCli(['check', '--min-free', '4096'], { env: cliEnv(scenario) });
    expect(usage.code, usage.stderr).toBe(64);
    expect(usage.stderr).toMatch(/a bare number is a fraction of total memory and must be at most 1/);
  });
});

describe('one set of defaults', () => {
  it('gateDefaults is frozen and is what the DEFAULT_ constants and the CLI show', async () => {
    expect(Object.isFrozen(gateDefaults)).toBe(true);
    expect(() => {
      (gateDefaults as { timeoutMs: number }).timeoutMs = 1;
    }).toThrow(TypeError);
    expect(gateDefaults).toEqual({
      intervalMs: DEFAULT_INTERVAL_MS,
      stableMs: DEFAULT_STABLE_MS,
      stableToleranceBytes: DEFAULT_STABLE_TOLERANCE_BYTES,
      timeoutMs: DEFAULT_TIMEOUT_MS,
      killGraceMs: DEFAULT_KILL_GRACE_MS,
      callTimeoutMs: DEFAULT_CALL_TIMEOUT_MS,
    });
    // Wide enough that each flag's help stays on its line (in a pipe, help wraps at 80 columns).
    const help = await runCli(['wait', '--help'], { env: { ...process.env, COLUMNS: '400' } });
    expect(help.code).toBe(0);
    const shown = (flag: string): string | undefined => new RegExp(`^ +--${flag} \\S+ .*\\[default: ([^\\]]+)\\]$`, 'm').exec(help.stdout)?.[1];
    expect(shown('timeout')).toBe(formatDuration(gateDefaults.timeoutMs));
    expect(shown('stable')).toBe(formatDuration(gateDefaults.stableMs));
    expect(shown('interval')).toBe(formatDuration(gateDefaults.intervalMs));
    expect(shown('stable-tolerance')).toBe(formatBytes(gateDefaults.stableToleranceBytes));
    expect(shown('kill-grace')).toBe(formatDuration(gateDefaults.killGraceMs));
    expect(shown('nvml-timeout')).toBe(formatDuration(gateDefaults.callTimeoutMs));
  });

  /**
   * Runs `start` with its timers faked. Reads are real (the addon's thread); the test moves the
   * timers only between polls, when no NVML call is in flight, so a timeout can be seen at work
   * without waiting it out. (The gate measures elapsed time on the real monotonic clock.)
   */
  function onFakeClock<T>(start: (onPoll: (evaluation: Evaluation) => void) => Promise<T>) {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const polls: Evaluation[] = [];
    let settled: { value: T } | { error: unknown } | null = null;
    const running = start((evaluation) => polls.push(evaluation)).then(
      (value) => (settled = { value }),
      (error: unknown) => (settled = { error }),
    );
    return {
      polls,
      settled: () => settled,
      running,
      /**
       * Resolves once `count` polls were evaluated or the run ended, running the timers that are
       * due meanwhile (a wait's first shared poll is a timer of 0 ms) but moving no time.
       */
      polled: async (count: number): Promise<void> => {
        while (polls.length < count && settled === null) {
          await vi.advanceTimersByTimeAsync(0);
          await new Promise<void>((resolve) => setImmediate(resolve));
        }
      },
    };
  }

  it('waitForGpusFree stops at gateDefaults.timeoutMs, as gate() does, when no timeout is given', async () => {
    useScenario({ devices: [rtxProDevice(0, 50 * GiB)] });
    const libraryPath = freshSimulator();
    // A poll interval beyond the timeout: after the first poll, only timers are pending.
    const intervalMs = 10 * gateDefaults.timeoutMs;
    const wait = onFakeClock((onPoll) => waitForGpusFree({ libraryPath, env: {}, intervalMs, onPoll }));
    await wait.polled(1);
    // The timer is set for the default less the real time already spent (opening NVML, the first read): far less than 10 s.
    await vi.advanceTimersByTimeAsync(gateDefaults.timeoutMs - 10_000);
    expect(wait.settled()).toBeNull();
    await vi.advanceTimersByTimeAsync(10_000);
    await wait.running;
    const error = (wait.settled() as { error: unknown }).error;
    expect(error).toBeInstanceOf(GpuWaitTimeoutError);
    expect((error as GpuWaitTimeoutError).timeoutMs).toBe(gateDefaults.timeoutMs);
    expect((error as GpuWaitTimeoutError).evaluation?.devices[0]?.reasons).toContain('memory');
    vi.useRealTimers();

    const viaGate = onFakeClock((onPoll) => gate({ libraryPath, env: {}, stale: 'ignore', intervalMs, onPoll }));
    await viaGate.polled(1);
    await vi.advanceTimersByTimeAsync(gateDefaults.timeoutMs - 10_000);
    expect(viaGate.settled()).toBeNull();
    await vi.advanceTimersByTimeAsync(10_000);
    await viaGate.running;
    const outcome = (viaGate.settled() as { value: Awaited<ReturnType<typeof gate>> }).value;
    expect(outcome.result).toBe('timeout');
    expect(outcome.reason).toMatch(new RegExp(`^GPUs not free after ${formatDuration(gateDefaults.timeoutMs)}: GPU 0 `));
  });

  it('timeoutMs: Infinity waits past the default timeout, until the signal ends it', async () => {
    useScenario({ devices: [rtxProDevice(0, 50 * GiB)] });
    const controller = new AbortController();
    const intervalMs = 10 * gateDefaults.timeoutMs;
    const wait = onFakeClock((onPoll) => waitForGpusFree({ libraryPath: freshSimulator(), env: {}, timeoutMs: Infinity, intervalMs, signal: controller.signal, onPoll }));
    await wait.polled(1);
    await vi.advanceTimersByTimeAsync(gateDefaults.timeoutMs + 1);
    expect(wait.settled()).toBeNull();
    controller.abort();
    await wait.running;
    expect((wait.settled() as { error: unknown }).error).toBeInstanceOf(GpuWaitAbortError);
  });

  it('a wait needs free memory steady for gateDefaults.stableMs, as gate() does, when no stableMs is given', async () => {
    // 2 GiB used and no process listed: memory that may still come back, so the whole window applies.
    useScenario({ devices: [rtxProDevice(0, 2 * GiB)] });
    const polls: Evaluation[] = [];
    const result = await waitForGpusFree({ libraryPath: freshSimulator(), env: {}, minFree: 0.5, onPoll: (evaluation) => polls.push(evaluation) });
    const last = result.devices[0];
    expect(last?.ok).toBe(true);
    expect(last?.stableForMs).toBeGreaterThanOrEqual(gateDefaults.stableMs);
    // Every poll before was held back by stability alone, its window still short of the default.
    const before = polls.slice(0, -1).map((evaluation) => evaluation.devices[0]);
    expect(before.length).toBeGreaterThan(0);
    for (const gpu of before) {
      expect(gpu?.reasons).toEqual(['unstable']);
      expect(gpu?.stableForMs).toBeLessThan(gateDefaults.stableMs);
    }
  });
});
