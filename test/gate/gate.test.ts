/**
 * gate() through the real addon and the NVML simulator: what `gpugate wait` / `check` do, for a
 * Node program. Ready, busy with its holders, timeout, unavailable (a lost GPU, no library),
 * interrupted by an AbortSignal, the stale scan that reuses the first poll's read, and the NVML
 * calls a gate makes, counted by the simulator: a further poll on an unchanged idle host, or on a
 * busy GPU whose memory holds still, reads memory only.
 */
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config-error';
import { gate, type GateEvent } from '../../src/gate/gate';
import { waitForGpusFree, type Evaluation } from '../../src/gate/wait';
import { NvmlError } from '../../src/nvml/nvml-error';
import { parseDuration } from '../../src/units';
import { killSpawned, spawnSleeper } from '../helpers/processes';
import { replaceScenario } from '../helpers/sim';
import { bundledScenario, freshSimulator, GiB, rtxProDevice, simCallsOf, tempDir, useScenario } from '../helpers/session-helpers';

const MEMORY_READS = new Set(['nvmlDeviceGetMemoryInfo_v2', 'nvmlDeviceGetMemoryInfo']);

const gpu = rtxProDevice;

const callsOf = simCallsOf;

function sum(calls: Record<string, number>): number {
  return Object.values(calls).reduce((total, n) => total + n, 0);
}

afterEach(async () => {
  delete process.env['GPUGATE_SIM_STATS'];
  await killSpawned();
});

describe('gate() on the simulator', () => {
  it('ready: an idle host passes on its first poll, with the library and selection in the outcome', async () => {
    useScenario({ devices: [gpu(0, 0), gpu(1, 0)] });
    const polls: Evaluation[] = [];
    const outcome = await gate({ libraryPath: freshSimulator(), minFree: { fraction: 0.9 }, stableMs: 0, env: {}, onPoll: (e) => polls.push(e) });
    expect(outcome).toMatchObject({ result: 'ready', error: null, polls: 1, selection: { indices: [0, 1], source: 'all' } });
    expect(outcome.reason).toMatch(/^GPUs 0,1 free and stable after \S+ \(1 polls\)$/);
    expect(outcome.library?.path).toMatch(/gpugate_sim/);
    expect(outcome.evaluation?.devices.map((d) => [d.index, d.ok, d.computeMode])).toEqual([[0, true, 'default'], [1, true, 'default']]);
    expect(polls).toHaveLength(1);
  });

  it('busy: a check names the failing GPU and its holder, classified', async () => {
    const holder = await spawnSleeper('VLLM::Worker_TP1');
    useScenario({ devices: [gpu(0, 0), gpu(1, 40 * GiB, [{ pid: holder, usedBytes: 40 * GiB }])] });
    const outcome = await gate({ mode: 'check', libraryPath: freshSimulator(), minFree: { fraction: 0.9 }, env: {} });
    expect(outcome.result).toBe('busy');
    expect(outcome.reason).toMatch(new RegExp(`^GPUs not free: GPU 1 \\(GPU-00000001-[^)]*\\): free 56GiB < needed \\S+; held by ${holder}/VLLM::Worker_TP1/active \\(user \\S+, started [^)]* ago\\)$`));
    const busy = outcome.evaluation!.devices.find((d) => d.index === 1)!;
    expect(busy.reasons).toEqual(['memory']);
    expect(busy.holders.map((h) => [h.pid, h.class])).toEqual([[holder, 'active']]);
    // A check scans /proc only when an action or stale 'fail' needs it.
    expect(outcome.stale.report).toBeNull();
  });

  it('timeout: the last evaluation and the reason per GPU; the stale scan ran once, on the first read', async () => {
    useScenario({ devices: [gpu(0, 50 * GiB, [{ pid: 4_194_304, usedBytes: 50 * GiB }])] });
    const events: GateEvent['kind'][] = [];
    // A deadline the first read (opening NVML, the stale scan) meets even on a loaded machine; how
    // many polls fit before it is the machine's business (the next test counts polls by event).
    const outcome = await gate({ libraryPath: freshSimulator(), stableMs: 0, intervalMs: 50, timeoutMs: 2000, env: {}, onEvent: (e) => events.push(e.kind) });
    expect(outcome.result).toBe('timeout');
    expect(outcome.reason).toMatch(/^GPUs not free after 2s: GPU 0 \(GPU-00000000-[^)]*\): used 50GiB > allowed 1GiB; held by 4194304\/\?\/gone$/);
    expect(outcome.polls).toBeGreaterThanOrEqual(1);
    expect(outcome.evaluation?.devices[0]?.reasons).toEqual(['memory']);
    expect(events).toEqual(['library', 'selection', 'stale-scan']);
    expect(outcome.stale.report?.holders.map((h) => [h.pid, h.class])).toEqual([[4_194_304, 'gone']]);
    expect(outcome.error).toBeNull();
  });

  it('the stale scan runs once, on the first read, however many polls follow', async () => {
    useScenario({ devices: [gpu(0, 50 * GiB, [{ pid: 4_194_304, usedBytes: 50 * GiB }])] });
    const events: GateEvent['kind'][] = [];
    // Ended by its fourth poll (an event), not by a deadline that a loaded machine may reach first.
    const controller = new AbortController();
    const outcome = await gate({
      libraryPath: freshSimulator(), stableMs: 0, intervalMs: 20, timeoutMs: 60_000, env: {}, signal: controller.signal,
      onEvent: (e) => events.push(e.kind), onPoll: (e) => { if (e.polls === 4) controller.abort(); },
    });
    expect(outcome).toMatchObject({ result: 'interrupted', polls: 4, error: null });
    expect(outcome.evaluation?.devices[0]?.reasons).toEqual(['memory']);
    expect(events).toEqual(['library', 'selection', 'stale-scan']);
    expect(outcome.stale.report?.holders.map((h) => [h.pid, h.class])).toEqual([[4_194_304, 'gone']]);
  });

  it('unavailable: a lost GPU ends the gate at once with the NvmlError', async () => {
    useScenario(bundledScenario('lost-gpu.json'));
    const outcome = await gate({ libraryPath: freshSimulator(), timeoutMs: 20_000, env: {} });
    expect(outcome.result).toBe('unavailable');
    expect(outcome.error).toBeInstanceOf(NvmlError);
    expect((outcome.error as NvmlError).code).toBe('NVML_ERROR_GPU_IS_LOST');
    expect(outcome.reason).toBe(outcome.error?.message);
  });

  it('unavailable: a missing library is an outcome naming where it looked, not a rejection', async () => {
    const outcome = await gate({ libraryPath: path.join(tempDir(), 'no-such-libnvidia-ml.so.1'), env: {} });
    expect(outcome.result).toBe('unavailable');
    expect((outcome.error as NvmlError).code).toBe('GPUGATE_LIBRARY_NOT_FOUND');
    expect(outcome.library).toBeNull();
    expect(outcome.reason).toMatch(/no-such-libnvidia-ml\.so\.1/);
  });

  it('config-error: a selector that matches nothing', async () => {
    useScenario({ devices: [gpu(0, 0)] });
    const outcome = await gate({ libraryPath: freshSimulator(), gpus: ['7'], env: {} });
    expect(outcome.result).toBe('config-error');
    expect(outcome.reason).toMatch(/GPU selector "7" matches no GPU index/);
  });

  it('config-error: a duration longer than a timer holds (timeoutMs 1e20 would time out at once), before any NVML read', async () => {
    useScenario({ devices: [gpu(0, 50 * GiB, [{ pid: 4_194_304, usedBytes: 50 * GiB }])] });
    for (const name of ['timeoutMs', 'intervalMs', 'stableMs', 'killGraceMs', 'callTimeoutMs'] as const) {
      const outcome = await gate({ libraryPath: freshSimulator(), [name]: 1e20, env: {} });
      expect(outcome, name).toMatchObject({ result: 'config-error', evaluation: null, polls: 0, library: null });
      expect(outcome.error).toBeInstanceOf(ConfigError);
      expect(outcome.error).toMatchObject({ code: 'GPUGATE_CONFIG', option: name });
      expect(outcome.reason).toContain(`option ${name} 100000000000000000000 is too long: expected at most 2147483647 ms`);
    }
    // The longest accepted timeout is a real one: the busy GPU is polled until the signal ends the wait.
    const controller = new AbortController();
    const outcome = await gate({ libraryPath: freshSimulator(), timeoutMs: 2 ** 31 - 1, intervalMs: 50, stableMs: 0, env: {}, signal: controller.signal, onPoll: (e) => { if (e.polls === 3) controller.abort(); } });
    expect(outcome).toMatchObject({ result: 'interrupted', polls: 3 });
    await expect(waitForGpusFree({ libraryPath: freshSimulator(), timeoutMs: 1e20 })).rejects.toMatchObject({ name: 'ConfigError', option: 'timeoutMs' });
  });

  it('config-error, not an internal error: callTimeoutMs just past the longest timer (2^31 + 5 ms), and 0 ms', async () => {
    useScenario({ devices: [gpu(0, 0)] });
    const tooLong = await gate({ libraryPath: freshSimulator(), callTimeoutMs: 2 ** 31 + 5, env: {} });
    expect(tooLong).toMatchObject({ result: 'config-error', evaluation: null, polls: 0, library: null });
    expect(tooLong.error).toBeInstanceOf(ConfigError);
    expect(tooLong.error).toMatchObject({ code: 'GPUGATE_CONFIG', option: 'callTimeoutMs' });
    expect(tooLong.reason).toContain('option callTimeoutMs 2147483653 is too long: expected at most 2147483647 ms');
    const zero = await gate({ libraryPath: freshSimulator(), callTimeoutMs: 0, env: {} });
    expect(zero).toMatchObject({ result: 'config-error', polls: 0, library: null });
    expect(zero.error).toBeInstanceOf(ConfigError);
    expect(zero.error).toMatchObject({ code: 'GPUGATE_CONFIG', option: 'callTimeoutMs' });
  });

  it('config-error: a poll interval of 0 ms (it would spin), as --interval 0 is a usage error', async () => {
    useScenario({ devices: [gpu(0, 0)] });
    await expect(waitForGpusFree({ libraryPath: freshSimulator(), intervalMs: 0 })).rejects.toMatchObject({ name: 'ConfigError', option: 'intervalMs', message: expect.stringContaining('expected a duration above 0 ms') });
    const spin = await gate({ libraryPath: freshSimulator(), intervalMs: 0, env: {} });
    expect(spin).toMatchObject({ result: 'config-error', polls: 0, library: null });
    expect(spin.error).toMatchObject({ name: 'ConfigError', code: 'GPUGATE_CONFIG', option: 'intervalMs' });
  });

  it('config-error: minFree of the whole GPU (fraction 1) can never be met, the same class and code as the command line', async () => {
    useScenario({ devices: [gpu(0, 0)] });
    const outcome = await gate({ libraryPath: freshSimulator(), minFree: { fraction: 1 }, env: {} });
    expect(outcome).toMatchObject({ result: 'config-error', evaluation: null, polls: 0 });
    expect(outcome.error).toBeInstanceOf(ConfigError);
    expect(outcome.error).toMatchObject({ code: 'GPUGATE_CONFIG', option: 'minFree' });
    expect(outcome.reason).toMatch(/minFree fraction 1 is out of range: expected above 0 and below 1/);
    // The most a maxUsed may be is all of it: that stays accepted.
    expect((await gate({ mode: 'check', libraryPath: freshSimulator(), maxUsed: { fraction: 1 }, env: {} })).result).toBe('ready');
  });

  it('interrupted: an AbortSignal ends the wait with the last evaluation, whatever aborted it', async () => {
    useScenario({ devices: [gpu(0, 50 * GiB)] });
    const controller = new AbortController();
    let polls = 0;
    const outcome = await gate({
      libraryPath: freshSimulator(),
      intervalMs: 50,
      env: {},
      signal: controller.signal,
      onPoll: () => {
        polls += 1;
        if (polls === 3) controller.abort();
      },
    });
    expect(outcome.result).toBe('interrupted');
    expect(outcome.polls).toBe(3);
    expect(outcome.evaluation?.devices[0]?.reasons).toEqual(['memory', 'unstable']);
    expect(outcome.reason).toMatch(/^interrupted by an abort after \S+: GPU 0 .*used 50GiB > allowed 1GiB/);
    expect(outcome.error).toBeNull();
  });

  it('interrupted: the reason gives the time the abort came, not when the gate could stop (opening NVML cannot be aborted)', async () => {
    useScenario({ devices: [gpu(0, 50 * GiB)], faults: [{ function: 'nvmlInit_v2', delayMs: 1500 }] });
    const controller = new AbortController();
    const opening = gate({ libraryPath: freshSimulator(), stableMs: 0, intervalMs: 50, timeoutMs: 60_000, env: {}, signal: controller.signal });
    controller.abort();
    const outcome = await opening;
    expect(outcome.result).toBe('interrupted');
    const said = /^interrupted by an abort after (\S+?)(?::|$)/.exec(outcome.reason);
    expect(said, outcome.reason).not.toBeNull();
    // The open takes 1.5 s of the simulator's delay; the abort came before it.
    expect(parseDuration(said![1]!)).toBeLessThanOrEqual(outcome.elapsedMs - 1500);
  });

  it('accept: a check is ready when the predicate takes its one read, busy when it declines, whatever the GPUs are', async () => {
    useScenario({ devices: [gpu(0, 50 * GiB, [{ pid: 4_194_304, usedBytes: 50 * GiB }]), gpu(1, 0)] });
    const libraryPath = freshSimulator();
    const seen: Evaluation[] = [];
    const some = await gate({ mode: 'check', libraryPath, env: {}, accept: (e) => (seen.push(e), e.devices.some((d) => d.ok)) });
    expect(some).toMatchObject({ result: 'ready', reason: 'GPUs 1 free', polls: 1 });
    expect(seen).toEqual([some.evaluation]);
    expect(some.evaluation?.ok).toBe(false);
    useScenario({ devices: [gpu(0, 0), gpu(1, 0)] });
    const declined = await gate({ mode: 'check', libraryPath: freshSimulator(), env: {}, accept: async () => false });
    expect(declined).toMatchObject({ result: 'busy', reason: 'GPUs not free: every GPU free, but not accepted' });
    expect(declined.evaluation?.ok).toBe(true);
  });

  it('accept: a wait goes on polling while the predicate declines, asks one poll at a time, and ends when it accepts', async () => {
    useScenario({ devices: [gpu(0, 0), gpu(1, 0)] });
    const asked: number[] = [];
    let deciding = 0;
    let overlapped = false;
    const outcome = await gate({
      libraryPath: freshSimulator(),
      stableMs: 0,
      intervalMs: 20,
      timeoutMs: 20_000,
      env: {},
      accept: async (evaluation) => {
        overlapped ||= deciding > 0;
        deciding += 1;
        asked.push(evaluation.polls);
        // Slower than the interval: polls arrive while it decides.
        await new Promise((resolve) => setTimeout(resolve, 50));
        deciding -= 1;
        return asked.length === 4;
      },
    });
    expect(outcome.result).toBe('ready');
    expect(overlapped).toBe(false);
    expect(asked).toHaveLength(4);
    // One wait throughout (no restart): poll numbers only grow, and the accepted one is the outcome's.
    expect(asked.every((n, i) => i === 0 || n > asked[i - 1]!)).toBe(true);
    expect(outcome.polls).toBe(asked[3]);
    expect(outcome.reason).toMatch(/^GPUs 0,1 free and stable after /);
  });

  it('accept: an answer still pending when the timeout comes decides the outcome; a decline then times out', async () => {
    useScenario({ devices: [gpu(0, 0)] });
    const late = (answer: boolean) => () => new Promise<boolean>((resolve) => setTimeout(() => resolve(answer), 300));
    const accepted = await gate({ libraryPath: freshSimulator(), stableMs: 0, intervalMs: 20, timeoutMs: 100, env: {}, accept: late(true) });
    expect(accepted).toMatchObject({ result: 'ready', polls: 1 });
    const declined = await gate({ libraryPath: freshSimulator(), stableMs: 0, intervalMs: 20, timeoutMs: 100, env: {}, accept: late(false) });
    expect(declined).toMatchObject({ result: 'timeout', polls: 1 });
    expect(declined.reason).toMatch(/^GPUs not free after 100ms/);
  });

  it('accept: an error it throws ends the gate with that error, as its class says', async () => {
    useScenario({ devices: [gpu(0, 0)] });
    const failure = new ConfigError('count', 'needs more GPUs than there are');
    for (const mode of ['check', 'wait'] as const) {
      const outcome = await gate({ mode, libraryPath: freshSimulator(), stableMs: 0, env: {}, accept: () => { throw failure; } });
      expect(outcome).toMatchObject({ result: 'config-error', error: failure });
    }
  });

  it('accept: a GPU that frees among busy ones is read afresh (compute mode included) before the predicate is asked', async () => {
    // GPU 1 frees at 300 ms and at the same moment becomes prohibited: its memory alone would pass,
    // with the compute mode of the first read carried over.
    useScenario({
      devices: [gpu(0, 50 * GiB, [{ pid: 4_194_304, usedBytes: 50 * GiB }]), gpu(1, 50 * GiB, [{ pid: 4_194_303, usedBytes: 50 * GiB }])],
      timeline: [{ atMs: 300, device: 1, set: { memory: { usedBytes: 0 }, processes: [], computeMode: 'prohibited' } }],
    });
    let passed = 0;
    // Ended once a poll has seen GPU 1 prohibited (an event); the timeout is only a backstop.
    const controller = new AbortController();
    const outcome = await gate({
      libraryPath: freshSimulator(),
      stableMs: 0,
      intervalMs: 20,
      timeoutMs: 60_000,
      env: {},
      signal: controller.signal,
      onPoll: (e) => { if (e.devices[1]?.computeMode === 'prohibited') controller.abort(); },
      accept: (e) => {
        passed += e.devices.filter((d) => d.ok).length;
        return e.devices.some((d) => d.ok);
      },
    });
    expect(outcome.result).toBe('interrupted');
    expect(passed).toBe(0);
    expect(outcome.evaluation?.devices[1]).toMatchObject({ computeMode: 'prohibited', reasons: ['compute-mode'] });
  });

  it('rejects an option of the wrong type with a ConfigError naming it, before any NVML call', async () => {
    await expect(gate({ mode: 'sometimes' } as never)).rejects.toThrow(/option mode must be 'wait' or 'check'/);
    await expect(gate({ stale: 'ignore', killStale: true })).rejects.toSatisfy((error) => error instanceof ConfigError && error.code === 'GPUGATE_CONFIG' && error.option === 'stale');
    await expect(gate({ cleanShm: ['a/b'] })).rejects.toThrow(/option cleanShm/);
    await expect(gate({ accept: true } as never)).rejects.toThrow(/option accept must be a function/);
  });
});

describe('the NVML calls of a gate (simulator call statistics)', () => {
  it('an idle 8-GPU wait ready at its first poll: identity once, then one read of memory, compute mode and process lists', async () => {
    useScenario({ devices: Array.from({ length: 8 }, (_, i) => gpu(i, 0)) });
    const stats = path.join(tempDir(), `gate-idle-${process.pid}.json`);
    process.env['GPUGATE_SIM_STATS'] = stats;
    const outcome = await gate({ libraryPath: freshSimulator(), minFree: { fraction: 0.9 }, stableMs: 0, env: {} });
    expect(outcome.result).toBe('ready');
    const calls = callsOf(stats);
    // Per device: identity (handle, name, UUID, minor, PCI, compute capability, recovery action)
    // once per session, then one read: memory, compute mode, the three process lists. Nothing it
    // does not decide on.
    for (const fn of ['nvmlDeviceGetHandleByIndex_v2', 'nvmlDeviceGetUUID', 'nvmlDeviceGetFieldValues', 'nvmlDeviceGetMemoryInfo_v2', 'nvmlDeviceGetComputeMode', 'nvmlDeviceGetComputeRunningProcesses_v3']) {
      expect(calls[fn], fn).toBe(8);
    }
    for (const fn of ['nvmlDeviceGetPersistenceMode', 'nvmlDeviceGetMigMode', 'nvmlDeviceGetUtilizationRates', 'nvmlDeviceGetTemperature', 'nvmlDeviceGetPowerUsage']) {
      expect(calls[fn] ?? 0, fn).toBe(0);
    }
    // 94 calls before the recovery action; its read adds exactly one per GPU at open (8), so the
    // bound moved from 100 to 108 with the same headroom. Per-poll reads are bounded below.
    expect(sum(calls)).toBeLessThanOrEqual(108);
  });

  it('an idle wait ready at its second poll (the window closes at once: nothing left to free) reads memory twice per GPU, no confirming read', async () => {
    useScenario({ devices: Array.from({ length: 8 }, (_, i) => gpu(i, 0)) });
    const stats = path.join(tempDir(), `gate-second-${process.pid}.json`);
    process.env['GPUGATE_SIM_STATS'] = stats;
    const outcome = await gate({ libraryPath: freshSimulator(), minFree: { fraction: 0.9 }, intervalMs: 100, env: {} });
    expect(outcome).toMatchObject({ result: 'ready', polls: 2 });
    expect(outcome.evaluation?.devices.every((d) => d.settled)).toBe(true);
    const calls = callsOf(stats);
    // The second poll may end the wait, so it reads every field it decides on itself.
    expect(calls['nvmlDeviceGetMemoryInfo_v2']).toBe(16);
    expect(calls['nvmlDeviceGetComputeMode']).toBe(16);
  });

  it('a wait that sits out its stability window reads memory once per read, every field on the read that may end it', async () => {
    // 1 GiB in use by no listed process: never "nothing left to free", so the 350 ms window is
    // waited out. Memory moves by more than the stability tolerance (256 MiB) at the second and
    // the third read of the 8 GPUs: the simulator's call count, not the gate's evaluations, which a
    // loaded machine may run late and coalesce. So the window starts at the third read at the
    // earliest, and only a later read can end it.
    const moved = (atCall: number, usedBytes: number) => ({ atCall, function: 'nvmlDeviceGetMemoryInfo_v2', device: 'all', set: { memory: { usedBytes } } });
    useScenario({ devices: Array.from({ length: 8 }, (_, i) => gpu(i, GiB)), timeline: [moved(8, GiB + GiB / 2), moved(16, 2 * GiB)] });
    const stats = path.join(tempDir(), `gate-window-${process.pid}.json`);
    process.env['GPUGATE_SIM_STATS'] = stats;
    const outcome = await gate({ libraryPath: freshSimulator(), minFree: { fraction: 0.9 }, stableMs: 350, intervalMs: 100, timeoutMs: 60_000, env: {} });
    expect(outcome.result).toBe('ready');
    expect(outcome.elapsedMs).toBeGreaterThanOrEqual(350);
    // Decided on the memory of the last change: both moves were read.
    expect(outcome.evaluation?.devices.map((device) => device.memory?.usedBytes)).toEqual(Array(8).fill(2 * GiB));
    const calls = callsOf(stats);
    // Memory once per read of the 8 GPUs: the three that saw it move, and at least one after the
    // third (the window starts there). Every read evaluated is a poll; a read that arrived while an
    // earlier one was still being evaluated may be passed over for a newer one.
    const reads = calls['nvmlDeviceGetMemoryInfo_v2']! / 8;
    expect(Number.isInteger(reads)).toBe(true);
    expect(reads).toBeGreaterThanOrEqual(4);
    expect(outcome.polls).toBeGreaterThanOrEqual(2);
    expect(outcome.polls).toBeLessThanOrEqual(reads);
    // Every field twice: the first read, and either the read after which the window could be over
    // or the read that confirms a decision made on a memory-only read.
    expect(calls['nvmlDeviceGetComputeMode']).toBe(16);
  });

  it('a further poll on an unchanged idle host reads memory only', async () => {
    // 1 GiB in use by no listed process: free enough, but not "nothing left to free", so the
    // window of an hour is waited out and every poll finds the same memory.
    useScenario({ devices: Array.from({ length: 8 }, (_, i) => gpu(i, GiB)) });
    // Each run ends at a given poll (an event), so the longer one has exactly 7 more polls.
    const run = async (name: string, lastPoll: number): Promise<{ polls: number; calls: Record<string, number> }> => {
      const stats = path.join(tempDir(), `gate-${name}-${process.pid}.json`);
      process.env['GPUGATE_SIM_STATS'] = stats;
      const controller = new AbortController();
      const outcome = await gate({
        libraryPath: freshSimulator(), minFree: { fraction: 0.9 }, stableMs: 3_600_000, intervalMs: 20, timeoutMs: 60_000, env: {},
        signal: controller.signal, onPoll: (e) => { if (e.polls === lastPoll) controller.abort(); },
      });
      delete process.env['GPUGATE_SIM_STATS'];
      expect(outcome).toMatchObject({ result: 'interrupted', polls: lastPoll });
      expect(outcome.evaluation?.devices.every((d) => d.reasons.join() === 'unstable')).toBe(true);
      return { polls: outcome.polls, calls: callsOf(stats) };
    };
    const shorter = await run('short', 3);
    const longer = await run('long', 10);
    const polls = longer.polls - shorter.polls;
    expect(polls).toBe(7);
    const grown = Object.entries(longer.calls).filter(([fn, n]) => n !== (shorter.calls[fn] ?? 0));
    expect(grown.map(([fn]) => fn).filter((fn) => !MEMORY_READS.has(fn))).toEqual([]);
    // One memory read per GPU per poll; a read still in flight when a wait is aborted is counted
    // by the simulator but not evaluated as a poll, so each run may hold one more read than polls.
    const reads = longer.calls['nvmlDeviceGetMemoryInfo_v2']! - shorter.calls['nvmlDeviceGetMemoryInfo_v2']!;
    expect(reads % 8).toBe(0);
    expect(reads / 8).toBeGreaterThanOrEqual(polls - 1);
    expect(reads / 8).toBeLessThanOrEqual(polls + 1);
  });

  it('a busy GPU whose memory holds still: after the first poll every poll reads memory only, naming the holders of the first read', async () => {
    useScenario({ devices: [gpu(0, 50 * GiB, [{ pid: 4_194_304, usedBytes: 50 * GiB }])] });
    // Each run ends at a given poll (an event), so the longer one has exactly 7 more polls.
    const run = async (name: string, lastPoll: number): Promise<{ polls: number; calls: Record<string, number>; holders: number[] | undefined }> => {
      const stats = path.join(tempDir(), `gate-busy-${name}-${process.pid}.json`);
      process.env['GPUGATE_SIM_STATS'] = stats;
      const controller = new AbortController();
      const outcome = await gate({
        libraryPath: freshSimulator(), intervalMs: 20, timeoutMs: 60_000, env: {},
        signal: controller.signal, onPoll: (e) => { if (e.polls === lastPoll) controller.abort(); },
      });
      delete process.env['GPUGATE_SIM_STATS'];
      expect(outcome).toMatchObject({ result: 'interrupted', polls: lastPoll });
      expect(outcome.evaluation?.devices[0]?.reasons).toContain('memory');
      return { polls: outcome.polls, calls: callsOf(stats), holders: outcome.evaluation?.devices[0]?.holders.map((h) => h.pid) };
    };
    const shorter = await run('short', 3);
    const longer = await run('long', 10);
    expect(longer.polls - shorter.polls).toBe(7);
    // The further polls called nothing but the memory read.
    const grown = Object.entries(longer.calls).filter(([fn, n]) => n !== (shorter.calls[fn] ?? 0));
    expect(grown.map(([fn]) => fn).filter((fn) => !MEMORY_READS.has(fn))).toEqual([]);
    // The lists and the compute mode were read once, by the first poll (a non-empty compute list
    // takes a size probe and the read).
    expect(longer.calls['nvmlDeviceGetComputeRunningProcesses_v3']).toBe(2);
    expect(longer.calls['nvmlDeviceGetGraphicsRunningProcesses_v3']).toBe(1);
    expect(longer.calls['nvmlDeviceGetMPSComputeRunningProcesses_v3']).toBe(1);
    expect(longer.calls['nvmlDeviceGetComputeMode']).toBe(1);
    // One memory read per poll; a read still in flight when the wait is aborted is counted by the
    // simulator but not evaluated as a poll.
    expect([longer.polls, longer.polls + 1]).toContain(longer.calls['nvmlDeviceGetMemoryInfo_v2']);
    // The last evaluation still names the holder, read at the same used memory.
    expect(longer.holders).toEqual([4_194_304]);
  });

  it('when a busy GPU\'s memory moves, the poll that sees it reads the lists again and names the new holders', async () => {
    const before = [{ pid: 4_194_304, usedBytes: 50 * GiB }];
    const after = [{ pid: 4_194_303, usedBytes: 60 * GiB }];
    const scenario = useScenario({ devices: [gpu(0, 50 * GiB, before)] });
    const stats = path.join(tempDir(), `gate-busy-moved-${process.pid}.json`);
    process.env['GPUGATE_SIM_STATS'] = stats;
    const seen: Array<{ used: number | undefined; holders: number[] }> = [];
    let movedAt: number | null = null;
    const controller = new AbortController();
    const outcome = await gate({
      libraryPath: freshSimulator(), intervalMs: 20, timeoutMs: 60_000, env: {}, signal: controller.signal,
      onPoll: (e) => {
        const device = e.devices[0]!;
        seen.push({ used: device.memory?.usedBytes, holders: device.holders.map((h) => h.pid) });
        // Another holder replaces the first after poll 3 (an event); three polls after memory is seen to move, stop.
        if (e.polls === 3) replaceScenario(scenario, { devices: [gpu(0, 60 * GiB, after)] });
        if (movedAt === null && device.memory?.usedBytes === 60 * GiB) movedAt = e.polls;
        if (movedAt !== null && e.polls === movedAt + 3) controller.abort();
      },
    });
    expect(outcome.result).toBe('interrupted');
    expect(movedAt).not.toBeNull();
    // Every poll names the holders of the memory it read: none names the old holder for the new memory.
    for (const poll of seen) expect(poll.holders).toEqual(poll.used === 60 * GiB ? [4_194_303] : [4_194_304]);
    const calls = callsOf(stats);
    // The lists were read twice: by the first poll, and again on the poll that saw the memory move.
    expect(calls['nvmlDeviceGetGraphicsRunningProcesses_v3']).toBe(2);
    expect(calls['nvmlDeviceGetMPSComputeRunningProcesses_v3']).toBe(2);
    expect(calls['nvmlDeviceGetComputeRunningProcesses_v3']).toBe(4);
    // No poll came close to "ready": the compute mode was read with the first poll only.
    expect(calls['nvmlDeviceGetComputeMode']).toBe(1);
  });

  it('a busy GPU whose process list is unreadable keeps saying why on the polls that read memory only', async () => {
    useScenario({
      devices: [gpu(0, 50 * GiB, [{ pid: 4_194_304, usedBytes: 50 * GiB }])],
      faults: [{ function: 'nvmlDeviceGetComputeRunningProcesses_v3', device: 0, return: 4 }],
    });
    const stats = path.join(tempDir(), `gate-busy-unknown-${process.pid}.json`);
    process.env['GPUGATE_SIM_STATS'] = stats;
    const unknown: Array<string | null> = [];
    const controller = new AbortController();
    const outcome = await gate({
      libraryPath: freshSimulator(), intervalMs: 20, timeoutMs: 60_000, env: {}, signal: controller.signal,
      onPoll: (e) => {
        unknown.push(e.devices[0]!.holdersUnknown);
        if (e.polls === 4) controller.abort();
      },
    });
    expect(outcome).toMatchObject({ result: 'interrupted', polls: 4 });
    // The list was read by the first poll only; every poll names its NVML code and the remedy.
    expect(callsOf(stats)['nvmlDeviceGetGraphicsRunningProcesses_v3'] ?? 0).toBeLessThanOrEqual(1);
    expect(unknown).toHaveLength(4);
    for (const why of unknown) expect(why).toMatch(/NVML_ERROR_NO_PERMISSION from nvmlDeviceGetComputeRunningProcesses_v3.*run gpugate as root on the host/);
  });

  it('a GPU that frees is confirmed with a fresh read of processes and compute mode before "ready"', async () => {
    // GPU 0 is held at first; the holder's memory is gone at 300 ms. The ready verdict rests on
    // a read of its process lists and compute mode taken for it, not on the earlier ones.
    useScenario({
      devices: [gpu(0, 50 * GiB, [{ pid: 4_194_304, usedBytes: 50 * GiB }])],
      timeline: [{ atMs: 300, device: 0, set: { memory: { usedBytes: 0 }, processes: [] } }],
    });
    const stats = path.join(tempDir(), `gate-frees-${process.pid}.json`);
    process.env['GPUGATE_SIM_STATS'] = stats;
    const outcome = await gate({ libraryPath: freshSimulator(), stableMs: 60_000, intervalMs: 50, timeoutMs: 20_000, env: {} });
    expect(outcome.result).toBe('ready');
    const device = outcome.evaluation!.devices[0]!;
    expect(device).toMatchObject({ ok: true, settled: true, holders: [], computeMode: 'default' });
    const calls = callsOf(stats);
    expect(calls['nvmlDeviceGetComputeMode']).toBeGreaterThanOrEqual(2);
  });
});
