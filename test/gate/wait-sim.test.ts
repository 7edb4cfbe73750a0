/**
 * waitForGpusFree through the real addon and the NVML simulator (each test loads its own copy
 * of the simulator library, so timelines and call counts start at zero): the restart race
 * resolves only once memory is free and stable, moving memory times out as 'unstable', a lost
 * GPU rejects at once, abort is prompt, and two waiters share one poll per interval.
 */
import { describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import * as path from 'node:path';
import { checkGpusOnce, waitForGpusFree, type Evaluation } from '../../src/gate/wait';
import { GpuWaitTimeoutError } from '../../src/gate/wait-timeout-error';
import { NvmlError } from '../../src/nvml/nvml-error';
import { bundledScenario, freshSimulator, GiB, rtxProDevice, simCallsOf, tempDir, useScenario } from '../helpers/session-helpers';


const gpu = rtxProDevice;

const statsOf = simCallsOf;

describe('waitForGpusFree on the simulator', () => {
  it('gpus: [1, 2] (numbers, as NVML users write them) selects those NVML indices through the real addon', async () => {
    useScenario({ devices: [gpu(0, 50 * GiB), gpu(1, 0), gpu(2, 0)] });
    const evaluation = await checkGpusOnce({ libraryPath: freshSimulator(), gpus: [1, 2], env: {} });
    expect(evaluation.ok).toBe(true);
    expect(evaluation.devices.map((d) => d.index)).toEqual([1, 2]);
  });

  it('restart race: resolves only after memory is free on every GPU and has stayed stable', async () => {
    useScenario(bundledScenario('restart-race.json'));
    const libraryPath = freshSimulator();
    const seen: Evaluation[] = [];
    const result = await waitForGpusFree({
      libraryPath,
      minFree: { fraction: 0.9 },
      stableMs: 800,
      intervalMs: 100,
      timeoutMs: 25_000,
      env: {},
      onPoll: (evaluation) => seen.push(evaluation),
    });
    expect(result.devices).toHaveLength(8);
    for (const device of result.devices) {
      expect(device.ok).toBe(true);
      expect(device.memory!.usedBytes).toBe(0);
      // Nothing is left to free (no holder, no memory in use): one quiet poll is enough; the
      // 800 ms window is only for memory that could still come back.
      expect(device.settled).toBe(true);
      expect(device.stableForMs).toBeGreaterThan(0);
    }
    const before = seen.slice(0, -1);
    expect(before.every((e) => !e.ok)).toBe(true);
    // The workers were listed and gone from /proc at first; memory was short; then free
    // everywhere but not yet stable; GPU 6, whose memory moved last, was the last to settle.
    expect(seen[0]!.devices[0]!.holders.map((h) => h.pid)).toEqual([48211]);
    if (!existsSync('/proc/48211')) expect(seen[0]!.devices[0]!.holders[0]!.class).toBe('gone');
    expect(before.some((e) => e.devices[0]!.reasons.includes('memory'))).toBe(true);
    expect(before.some((e) => e.devices[6]!.reasons.join() === 'unstable' && e.devices.filter((d) => d.index !== 6).every((d) => d.ok))).toBe(true);
    expect(before.some((e) => e.devices.every((d) => d.reasons.join() === 'unstable'))).toBe(true);
    expect(result.polls).toBe(seen.length);
  });

  it('memory that keeps moving times out with reason unstable', async () => {
    // Used memory climbs 1 GiB every 50 ms (from 1 GiB, wrapping at 40 GiB) for a minute: always
    // enough free, never idle, and no two samples 50 ms or more apart are within the tolerance.
    const timeline = Array.from({ length: 1200 }, (_, i) => ({ atMs: i * 50, device: 0, set: { memory: { usedBytes: ((i % 40) + 1) * GiB } } }));
    useScenario({ devices: [gpu(0, 0)], timeline });
    const error = await waitForGpusFree({ libraryPath: freshSimulator(), minFree: { fraction: 0.5 }, stableMs: 400, intervalMs: 30, timeoutMs: 1500, env: {} }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(GpuWaitTimeoutError);
    const timeout = error as GpuWaitTimeoutError;
    expect(timeout.evaluation!.devices[0]!.reasons).toEqual(['unstable']);
    expect(timeout.evaluation!.devices[0]!.stableForMs).toBeLessThan(400);
    expect(timeout.message).toMatch(/GPU 0 .*unstable/);
  });

  it('a lost GPU rejects at once with the NvmlError', async () => {
    useScenario(bundledScenario('lost-gpu.json'));
    const started = Date.now();
    const error = await waitForGpusFree({ libraryPath: freshSimulator(), timeoutMs: 20_000, intervalMs: 100, env: {} }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NvmlError);
    expect((error as NvmlError).code).toBe('NVML_ERROR_GPU_IS_LOST');
    expect((error as NvmlError).device).toBe(5);
    expect(Date.now() - started).toBeLessThan(15_000);
    // The other GPUs alone are fine.
    const evaluation = await checkGpusOnce({ libraryPath: freshSimulator(), gpus: ['0', '7'] });
    expect(evaluation.ok).toBe(true);
  });

  it('a GPU with no memory figures (unified memory) rejects a memory criterion at once; noProcesses still works', async () => {
    useScenario({
      devices: [gpu(0, 0), gpu(1, 0)],
      faults: [
        { function: 'nvmlDeviceGetMemoryInfo_v2', device: 1, return: 3 },
        { function: 'nvmlDeviceGetMemoryInfo', device: 1, return: 3 },
      ],
    });
    const error = await waitForGpusFree({ libraryPath: freshSimulator(), minFree: { fraction: 0.9 }, timeoutMs: 20_000, intervalMs: 100, env: {} }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(NvmlError);
    expect((error as NvmlError).code).toBe('NVML_ERROR_NOT_SUPPORTED');
    expect((error as NvmlError).device).toBe(1);
    expect((error as NvmlError).message).toMatch(/unified-memory/);
    const byProcesses = await waitForGpusFree({ libraryPath: freshSimulator(), noProcesses: true, timeoutMs: 20_000, intervalMs: 100, env: {} });
    expect(byProcesses.devices.map((d) => d.ok)).toEqual([true, true]);
  });

  it('a hung NVML call rejects with the NvmlError once the call deadline passes, not at the wait timeout', async () => {
    useScenario({ devices: [gpu(0, 50 * GiB)], faults: [{ function: '*', hang: true, atMs: 300 }] });
    const started = Date.now();
    const error = await waitForGpusFree({ libraryPath: freshSimulator(), callTimeoutMs: 400, intervalMs: 50, timeoutMs: 25_000, env: {} }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NvmlError);
    expect((error as NvmlError).code).toBe('GPUGATE_TIMEOUT');
    expect(Date.now() - started).toBeLessThan(15_000);
  });

  it('an abort signal rejects promptly with AbortError and the last evaluation', async () => {
    useScenario({ devices: [gpu(0, 50 * GiB)] });
    const controller = new AbortController();
    let polls = 0;
    const waiting = waitForGpusFree({
      libraryPath: freshSimulator(),
      stableMs: 0,
      intervalMs: 50,
      signal: controller.signal,
      env: {},
      onPoll: () => {
        polls += 1;
        if (polls === 3) controller.abort();
      },
    });
    const error = (await waiting.catch((e: unknown) => e)) as Error & { evaluation?: Evaluation };
    expect(error.name).toBe('AbortError');
    expect(error.evaluation!.devices[0]!.reasons).toEqual(['memory']);
    expect(polls).toBe(3);
  });

  it('two concurrent waiters cause one poll per interval (simulator call counts) and one NVML init', async () => {
    const statsDir = tempDir();
    const run = async (waiters: number, statsName: string): Promise<{ processCalls: number; inits: number; polls: number }> => {
      useScenario({ devices: [gpu(0, 50 * GiB), gpu(1, 50 * GiB)] });
      const stats = path.join(statsDir, statsName);
      process.env['GPUGATE_SIM_STATS'] = stats;
      const libraryPath = freshSimulator();
      // Every waiter ends when the first has polled six times (an event), not at a deadline a loaded machine may reach first.
      const controller = new AbortController();
      // A wait that resolved instead has no name: the expectation below catches it.
      const results = (await Promise.all(
        Array.from({ length: waiters }, (_, i) => waitForGpusFree({
          libraryPath, gpus: ['0'], intervalMs: 100, timeoutMs: 60_000, signal: controller.signal,
          onPoll: (e) => { if (i === 0 && e.polls === 6) controller.abort(); },
        }).catch((e: unknown) => e as Error & { evaluation?: Evaluation })),
      )) as Array<Error & { evaluation?: Evaluation }>;
      expect(results.map((r) => r.name)).toEqual(Array.from({ length: waiters }, () => 'AbortError'));
      delete process.env['GPUGATE_SIM_STATS'];
      const calls = statsOf(stats);
      const processCalls = Object.entries(calls)
        .filter(([name]) => /RunningProcesses/.test(name))
        .reduce((sum, [, n]) => sum + n, 0);
      return { processCalls, inits: calls['nvmlInit_v2'] ?? calls['nvmlInit'] ?? 0, polls: Math.max(...results.map((r) => r.evaluation!.polls)) };
    };
    const one = await run(1, 'one.json');
    const two = await run(2, 'two.json');
    expect(one.polls).toBeGreaterThan(4);
    expect(two.polls).toBeGreaterThan(4);
    const perPollOne = one.processCalls / one.polls;
    expect(perPollOne).toBeGreaterThan(0);
    // Separate polls would double the process-list calls; a shared poll keeps the per-poll cost.
    expect(two.processCalls / two.polls).toBeLessThan(perPollOne * 1.5);
    expect(two.inits).toBe(1);
  });

  it('a MIG instance selected by UUID prefix is judged on its own memory and processes', async () => {
    useScenario(bundledScenario('mig.json'));
    const libraryPath = freshSimulator();
    const idle = await checkGpusOnce({ libraryPath, gpus: ['MIG-b83e'] });
    expect(idle.ok).toBe(true);
    expect(idle.devices).toHaveLength(1);
    expect(idle.devices[0]).toMatchObject({ index: 0, uuid: 'MIG-b83e05d1-7c4a-5e19-a2f6-0e9d3c7b5a41', migUuid: 'MIG-b83e05d1-7c4a-5e19-a2f6-0e9d3c7b5a41' });
    expect(idle.devices[0]!.memory!.totalBytes).toBe(25098715136);
    const busy = await checkGpusOnce({ libraryPath, gpus: ['MIG-4a1c'] });
    expect(busy.devices[0]!.reasons).toEqual(['memory']);
    expect(busy.devices[0]!.holders.map((h) => h.pid)).toEqual([51007]);
    if (!existsSync('/proc/51007')) expect(busy.devices[0]!.holders[0]!.class).toBe('gone');
    const whole = await checkGpusOnce({ libraryPath, gpus: ['1'] });
    expect(whole.devices[0]).toMatchObject({ index: 1, migUuid: null, ok: true });
  });

  it('checkGpusOnce opens, samples once and closes its own session', async () => {
    // 2^22 is the kernel's PID_MAX_LIMIT: never a live pid.
    useScenario({ devices: [gpu(0, 2 * GiB, [{ pid: 4_194_304, usedBytes: 2 * GiB }])] });
    const evaluation = await checkGpusOnce({ libraryPath: freshSimulator(), maxUsed: { bytes: GiB }, env: {} });
    expect(evaluation.ok).toBe(false);
    expect(evaluation.devices[0]).toMatchObject({ index: 0, reasons: ['memory'], maxUsedBytes: GiB, unattributedBytes: 0 });
    expect(evaluation.devices[0]!.holders.map((h) => h.class)).toEqual(['gone']);
  });

  it('reads the holder-inspection context from /proc only once a GPU has a holder to classify', async () => {
    let procReads = 0;
    // prepareInspectContext starts from options.procRoot: count how often the context is built.
    const inspectHolders = {
      get procRoot(): string {
        procReads += 1;
        return '/proc';
      },
    };
    useScenario({ devices: [gpu(0, 0), gpu(1, 0)] });
    const idle = await checkGpusOnce({ libraryPath: freshSimulator(), inspectHolders, env: {} });
    expect(idle.ok).toBe(true);
    expect(procReads).toBe(0);
    useScenario({ devices: [gpu(0, 0), gpu(1, 2 * GiB, [{ pid: 4_194_304, usedBytes: 2 * GiB }])] });
    const held = await checkGpusOnce({ libraryPath: freshSimulator(), inspectHolders, env: {} });
    expect(held.devices[1]!.holders.map((h) => h.class)).toEqual(['gone']);
    expect(procReads).toBe(1);
  });
});
