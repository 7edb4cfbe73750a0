/**
 * Policy tests of waitForGpusFree / checkGpusOnce against a small fake NvmlSession: criteria,
 * stability, timeout, abort, shared polling. The real addon + simulator path is in
 * wait-sim.test.ts.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { GpuDevice, NvmlSession, Snapshot, SnapshotOptions } from '../../src/types';
import { checkGpusOnce, waitForGpusFree, GpuWaitAbortError, type Evaluation } from '../../src/gate/wait';
import { GpuWaitTimeoutError } from '../../src/gate/wait-timeout-error';
import { ConfigError } from '../../src/config-error';
import { DeviceSelectionError } from '../../src/gate/device-selection-error';
import { FAKE_TOTAL_BYTES, GiB, fakeDevice, fakeMemory, fakeProcesses, fakeSnapshot, type FakeProcess } from '../helpers/fake-snapshot';

const TOTAL = FAKE_TOTAL_BYTES;

interface FakeGpu {
  usedBytes: number;
  processes?: FakeProcess[];
}

function device(index: number, gpu: FakeGpu): GpuDevice {
  return fakeDevice({ index, memory: fakeMemory(gpu.usedBytes, TOTAL), processes: fakeProcesses(gpu.processes ?? []) });
}

/** A fake session whose state is a function of the snapshot call number. */
class FakeSession implements NvmlSession {
  readonly library = { path: 'fake', driverVersion: null, nvmlVersion: null, cudaDriverVersion: null, variants: {} };
  closed = false;
  calls = 0;
  processCalls = 0;
  constructor(private readonly state: (call: number) => FakeGpu[] | Error) {}

  async snapshot(options: SnapshotOptions = {}): Promise<Snapshot> {
    return this.snapshotSync(options);
  }

  snapshotSync(options: SnapshotOptions = {}): Snapshot {
    if (this.closed) throw new Error('closed');
    this.calls += 1;
    if (options.processes) this.processCalls += 1;
    const state = this.state(this.calls);
    if (state instanceof Error) throw state;
    const devices = state.map((gpu, index) => device(index, gpu)).filter((d) => options.devices === undefined || options.devices.includes(d.index));
    return fakeSnapshot(devices);
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}

const controllers: AbortController[] = [];
afterEach(() => {
  for (const controller of controllers.splice(0)) controller.abort();
});

describe('waitForGpusFree criteria', () => {
  it('default criterion is maxUsed 1 GiB: resolves once used drops to 1 GiB', async () => {
    const session = new FakeSession((call) => [{ usedBytes: call < 5 ? 40 * GiB : 1 * GiB }]);
    const result = await waitForGpusFree({ session, intervalMs: 5, timeoutMs: 10_000 });
    expect(result.devices[0]).toMatchObject({ index: 0, ok: true, reasons: [], maxUsedBytes: GiB, neededFreeBytes: null });
    expect(result.polls).toBeGreaterThanOrEqual(4);
    expect(session.closed).toBe(false);
  });

  it('minFree fraction follows vLLM: free >= ceil(total * f) + margin, exactly at the edge', async () => {
    const needed = Math.ceil(TOTAL * 0.9) + 2 * GiB;
    const exact = await checkGpusOnce({ session: new FakeSession(() => [{ usedBytes: TOTAL - needed }]), minFree: { fraction: 0.9 }, marginBytes: 2 * GiB });
    expect(exact.ok).toBe(true);
    expect(exact.devices[0]!.neededFreeBytes).toBe(needed);
    expect(exact.devices[0]!.maxUsedBytes).toBeNull();
    const short = await checkGpusOnce({ session: new FakeSession(() => [{ usedBytes: TOTAL - needed + 1 }]), minFree: { fraction: 0.9 }, marginBytes: 2 * GiB });
    expect(short.ok).toBe(false);
    expect(short.devices[0]!.reasons).toEqual(['memory']);
  });

  it('impossible criteria reject with ConfigError before waiting', async () => {
    const session = new FakeSession(() => [{ usedBytes: 0 }]);
    await expect(waitForGpusFree({ session, minFree: { bytes: TOTAL + 1 }, timeoutMs: 1000 })).rejects.toThrow(ConfigError);
    await expect(waitForGpusFree({ session, minFree: { fraction: 0.99 }, marginBytes: 2 * GiB, timeoutMs: 1000 })).rejects.toThrow(/needs .* free but the GPU has only 96GiB/);
    await expect(waitForGpusFree({ session, minFree: { fraction: 1.5 } })).rejects.toThrow(ConfigError);
    await expect(waitForGpusFree({ session, maxUsed: { fraction: -0.1 } })).rejects.toThrow(ConfigError);
    await expect(waitForGpusFree({ session, gpus: ['7'] })).rejects.toThrow(DeviceSelectionError);
  });

  it('options of the wrong type are a ConfigError naming the option, before any NVML call', async () => {
    const session = new FakeSession(() => [{ usedBytes: 0 }]);
    const bad: Array<[Record<string, unknown>, RegExp]> = [
      [{ gpus: '0' }, /option gpus must be an array/],
      [{ gpus: [0, -1] }, /option gpus\[1\] must be an NVML index \(an integer >= 0\) or a non-empty selector string, got -1/],
      [{ gpus: ['0', 1.5] }, /option gpus\[1\] .* got 1\.5/],
      [{ gpus: [0, ''] }, /option gpus\[1\] .* got ""/],
      [{ gpus: [0, { index: 2 }] }, /option gpus\[1\] .* got \{"index":2\}/],
      [{ timeoutMs: -1 }, /option timeoutMs must be a finite number >= 0, got -1/],
      [{ intervalMs: '5s' }, /option intervalMs .* got "5s"/],
      [{ minFree: true }, /option minFree must be \{ fraction \} or \{ bytes \}/],
      [{ minFree: { percent: 90 } }, /option minFree must be \{ fraction \} or \{ bytes \}, got \{"percent":90\}/],
      [{ ignore: 'nv-hostengine' }, /option ignore/],
      [{ ignore: [42, null] }, /option ignore\[1\] must be a pid \(an integer > 0\) or a process name, got null/],
      [{ signal: {} }, /option signal must be an AbortSignal/],
      [{ onPoll: 'log' }, /option onPoll must be a function/],
    ];
    for (const [options, message] of bad) {
      await expect(waitForGpusFree({ session, ...options } as never)).rejects.toThrow(message);
      const option = Object.keys(options)[0];
      await expect(checkGpusOnce({ session, ...options } as never)).rejects.toSatisfy((error) => error instanceof ConfigError && error.code === 'GPUGATE_CONFIG' && error.option === option);
    }
    await expect(waitForGpusFree(null as never)).rejects.toThrow(/options must be an object/);
    expect(session.calls).toBe(0);
  });

  it('gpus takes NVML indices as numbers, as NVML users write them, alone or mixed with selector strings', async () => {
    const session = new FakeSession(() => [{ usedBytes: 0 }, { usedBytes: 40 * GiB }, { usedBytes: 0 }]);
    expect((await checkGpusOnce({ session, gpus: [0] })).devices.map((d) => d.index)).toEqual([0]);
    const mixed = await checkGpusOnce({ session, gpus: [2, '1'] });
    expect(mixed.devices.map((d) => [d.index, d.ok])).toEqual([[2, true], [1, false]]);
    await expect(checkGpusOnce({ session, gpus: [7] })).rejects.toThrow(/GPU selector "7" matches no GPU index/);
  });

  it('noProcesses waits for listed holders but always ignores gpugate itself and listed ignores', async () => {
    const session = new FakeSession((call) => [
      {
        usedBytes: GiB,
        processes: [
          { pid: process.pid, usedBytes: 100 },
          { pid: 999_999_901, usedBytes: 100 },
          ...(call < 4 ? [{ pid: 999_999_902, usedBytes: 100 }] : []),
        ],
      },
    ]);
    const seen: Evaluation[] = [];
    const result = await waitForGpusFree({ session, noProcesses: true, ignore: [999_999_901], stableMs: 0, intervalMs: 5, timeoutMs: 10_000, onPoll: (e) => seen.push(e) });
    expect(result.devices[0]!.ignoredPids.sort()).toEqual([process.pid, 999_999_901].sort());
    expect(result.devices[0]!.holders).toEqual([]);
    const first = seen[0]!.devices[0]!;
    expect(first.reasons).toEqual(['processes']);
    expect(first.holders.map((h) => [h.pid, h.class])).toEqual([[999_999_902, 'gone']]);
    expect(seen.length).toBe(result.polls);
  });

  it('unattributedBytes is used minus the listed processes', async () => {
    const evaluation = await checkGpusOnce({ session: new FakeSession(() => [{ usedBytes: 10 * GiB, processes: [{ pid: 999_999_903, usedBytes: 4 * GiB }] }]) });
    expect(evaluation.devices[0]!.unattributedBytes).toBe(6 * GiB);
    const unknown = await checkGpusOnce({ session: new FakeSession(() => [{ usedBytes: 10 * GiB, processes: [{ pid: 999_999_903, usedBytes: null }] }]) });
    expect(unknown.devices[0]!.unattributedBytes).toBeNull();
  });
});

describe('waitForGpusFree stability and settling', () => {
  it('success needs free memory steady within the tolerance for stableMs while memory can still come back', async () => {
    // Memory drops at call 3, wobbles within tolerance afterwards; a dead holder (no such pid) is
    // listed until call 8, so its memory may yet come back (real drivers hand it back in one step
    // when its teardown ends): never stable while it is listed, and the whole window is waited out.
    const gone = [{ pid: 999_999_903, usedBytes: 512 * 1024 ** 2 }];
    const session = new FakeSession((call) => [{ usedBytes: call < 3 ? 50 * GiB : call % 2 === 0 ? 512 * 1024 ** 2 : 612 * 1024 ** 2, processes: call < 8 ? gone : [] }]);
    const seen: Evaluation[] = [];
    const result = await waitForGpusFree({ session, stableMs: 150, intervalMs: 10, timeoutMs: 10_000, onPoll: (e) => seen.push(e) });
    expect(result.devices[0]!.stableForMs).toBeGreaterThanOrEqual(150);
    expect(result.devices[0]!.holders).toEqual([]);
    // While the dead holder was listed, no poll was ready, however long memory had held still.
    expect(seen.filter((e) => e.devices[0]!.holders.length > 0).every((e) => !e.ok)).toBe(true);
    const beforeDone = seen.slice(0, -1);
    expect(beforeDone.some((e) => e.devices[0]!.reasons.includes('memory'))).toBe(true);
    expect(beforeDone.some((e) => e.devices[0]!.reasons.join() === 'unstable')).toBe(true);
  });

  it('memory that keeps moving times out with reason unstable and the last evaluation', async () => {
    const session = new FakeSession((call) => [{ usedBytes: (call % 2) * 2 * GiB }]);
    // Flapping memory never settles: each sample at idle follows a move.
    const error = await waitForGpusFree({ session, minFree: { fraction: 0.5 }, stableMs: 100, intervalMs: 10, timeoutMs: 400 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(GpuWaitTimeoutError);
    const timeout = error as GpuWaitTimeoutError;
    expect(timeout.evaluation!.devices[0]!.reasons).toEqual(['unstable']);
    expect(timeout.message).toMatch(/GPU 0 .*unstable/);
  });

  it('nothing left to free: an idle GPU with no holder is stable after one quiet poll, not after stableMs', async () => {
    const session = new FakeSession((call) => [{ usedBytes: call < 3 ? 50 * GiB : 0 }]);
    const seen: Evaluation[] = [];
    const result = await waitForGpusFree({ session, stableMs: 60_000, intervalMs: 10, timeoutMs: 10_000, onPoll: (e) => seen.push(e) });
    expect(result.devices[0]!.settled).toBe(true);
    expect(result.devices[0]!.stableForMs).toBeGreaterThan(0);
    expect(result.devices[0]!.stableForMs).toBeLessThan(60_000);
    // The poll right after the drain (the window restarted there) was not yet enough.
    expect(seen.some((e) => e.devices[0]!.reasons.join() === 'unstable' && e.devices[0]!.memory!.usedBytes === 0)).toBe(true);
  });

  it('a live unrelated holder with all used memory accounted for settles too; unaccounted memory does not', async () => {
    // The caller's own pid is ignored by default; a pid of this test process's parent is a live holder.
    const live = [{ pid: process.ppid, usedBytes: 1 * GiB }];
    const settles = new FakeSession((call) => [{ usedBytes: call < 3 ? 50 * GiB : 1 * GiB, processes: live }]);
    const result = await waitForGpusFree({ session: settles, maxUsed: { bytes: 2 * GiB }, stableMs: 60_000, intervalMs: 10, timeoutMs: 10_000 });
    expect(result.devices[0]!.settled).toBe(true);
    expect(result.devices[0]!.holders.map((h) => h.class)).not.toContain('gone');
    const unaccounted = new FakeSession((call) => [{ usedBytes: call < 3 ? 50 * GiB : 1.5 * GiB, processes: live }]);
    const error = await waitForGpusFree({ session: unaccounted, maxUsed: { bytes: 2 * GiB }, stableMs: 60_000, intervalMs: 10, timeoutMs: 300 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(GpuWaitTimeoutError);
    expect((error as GpuWaitTimeoutError).evaluation!.devices[0]!.settled).toBe(false);
  });

  it('a failing snapshot rejects at once with that error', async () => {
    const boom = Object.assign(new Error('GPU is lost'), { code: 'NVML_ERROR_GPU_IS_LOST' });
    const session = new FakeSession((call) => (call >= 3 ? boom : [{ usedBytes: 50 * GiB }]));
    const started = Date.now();
    await expect(waitForGpusFree({ session, intervalMs: 10, timeoutMs: 20_000 })).rejects.toBe(boom);
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('abort rejects promptly with an AbortError carrying the last evaluation', async () => {
    const session = new FakeSession(() => [{ usedBytes: 50 * GiB }]);
    const controller = new AbortController();
    controllers.push(controller);
    let polls = 0;
    const waiting = waitForGpusFree({
      session,
      stableMs: 0,
      intervalMs: 10,
      signal: controller.signal,
      onPoll: () => {
        polls += 1;
        if (polls === 3) controller.abort();
      },
    });
    const error = await waiting.catch((e: unknown) => e);
    expect(polls).toBe(3);
    expect(error).toBeInstanceOf(GpuWaitAbortError);
    expect((error as GpuWaitAbortError).name).toBe('AbortError');
    expect((error as GpuWaitAbortError).evaluation?.devices[0]?.reasons).toEqual(['memory']);
    const callsAfter = session.calls;
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(session.calls).toBe(callsAfter);
  });

  it('an already aborted signal rejects without polling', async () => {
    const session = new FakeSession(() => [{ usedBytes: 0 }]);
    await expect(waitForGpusFree({ session, signal: AbortSignal.abort() })).rejects.toMatchObject({ name: 'AbortError' });
    expect(session.calls).toBe(0);
  });

  it('two concurrent waiters on one session share one poll per interval', async () => {
    const session = new FakeSession(() => [{ usedBytes: 50 * GiB }, { usedBytes: 50 * GiB }]);
    // Both end when the first has polled five times (an event), not at a deadline a loaded machine may reach first.
    const controller = new AbortController();
    type Ended = Error & { evaluation?: Evaluation };
    const ended = (e: unknown): Ended => e as Ended;
    const a = waitForGpusFree({ session, gpus: ['0'], intervalMs: 40, timeoutMs: 60_000, signal: controller.signal, onPoll: (e) => { if (e.polls === 5) controller.abort(); } }).catch(ended);
    const b = waitForGpusFree({ session, gpus: ['1'], intervalMs: 40, timeoutMs: 60_000, signal: controller.signal }).catch(ended);
    // A wait that resolved instead has no name: the first expectation catches it.
    const [ea, eb] = (await Promise.all([a, b])) as [Ended, Ended];
    expect([ea.name, eb.name]).toEqual(['AbortError', 'AbortError']);
    const pollsA = ea.evaluation!.polls;
    const pollsB = eb.evaluation!.polls;
    expect(pollsA).toBe(5);
    // Each poll served both waiters: the snapshots with process lists are the shared polls.
    expect(session.processCalls).toBeLessThanOrEqual(Math.max(pollsA, pollsB) + 1);
    expect(ea.evaluation!.snapshot.devices.map((d) => d.index)).toEqual([0, 1]);
  });

  it('rejects an empty selector list with a DeviceSelectionError: nothing to check is not "free"', async () => {
    const session = new FakeSession(() => [{ usedBytes: 50 * GiB }]);
    const waited = await waitForGpusFree({ session, gpus: [], timeoutMs: 1000 }).catch((e: unknown) => e);
    expect(waited).toBeInstanceOf(DeviceSelectionError);
    expect((waited as Error).message).toMatch(/selects no GPU.*allowEmptySelection/);
    await expect(checkGpusOnce({ session, gpus: [] })).rejects.toBeInstanceOf(DeviceSelectionError);
    await expect(checkGpusOnce({ session, env: { CUDA_VISIBLE_DEVICES: '-1' } })).rejects.toThrow(/CUDA_VISIBLE_DEVICES="-1" selects no GPU/);
  });

  it('selects nothing and resolves at once for an empty selector list with allowEmptySelection', async () => {
    const session = new FakeSession(() => [{ usedBytes: 50 * GiB }]);
    const result = await waitForGpusFree({ session, gpus: [], timeoutMs: 1000, allowEmptySelection: true });
    expect(result.devices).toEqual([]);
    expect(result.evaluation.selection.warnings.join()).toMatch(/no GPUs selected/);
  });

  it('checkGpusOnce reports without waiting and with no stability', async () => {
    const evaluation = await checkGpusOnce({ session: new FakeSession(() => [{ usedBytes: 50 * GiB }]), stableMs: 10_000 });
    expect(evaluation.ok).toBe(false);
    expect(evaluation.devices[0]!.reasons).toEqual(['memory']);
    expect(evaluation.polls).toBe(1);
  });
});
