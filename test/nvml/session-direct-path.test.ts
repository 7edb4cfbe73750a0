/**
 * The helper mode's direct path (native/direct_call.h): an awaited call that finds the session
 * idle is written to the helper's channel by the JavaScript thread and its reply read there when
 * libuv reports the channel readable. What the worker path promises holds here too: calls asked
 * meanwhile (asynchronous or blocking) answer in order with their own results, a missed deadline
 * kills the helper and names it, a crash is a typed rejection, and an idle session never keeps a
 * process alive. Timing comes from the simulator (delays, hangs, crashes), not from the clock.
 */
import { readFileSync, readlinkSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { NvmlError } from '../../src/nvml/nvml-error';
import { openNvml } from '../../src/nvml/session';
import { packageEntryLiteral, runNodeScript } from '../helpers/node-script';
import { simDevice } from '../helpers/sim';
import { closeTrackedSessions, trackSession } from '../helpers/tracked-sessions';
import { rejectionOf as caught } from '../helpers/thrown-by';
import { freshSimulator, useScenario } from '../helpers/session-helpers';
import { helperChildren, newHelper, parentTask, untilDefined as until } from '../helpers/helper-children';

afterEach(async () => {
  await closeTrackedSessions({ ignoreFailures: true });
  delete process.env['GPUGATE_SIM_SCENARIO'];
});

function exists(pid: number): boolean {
  try {
    readlinkSync(`/proc/${pid}/exe`);
    return true;
  } catch {
    return false;
  }
}

/** How many times a thread of this process has been switched out (it slept, or was preempted). */
function contextSwitches(task: string): number {
  const status = readFileSync(`/proc/${process.pid}/task/${task}/status`, 'utf8');
  const count = (name: string): number => Number(new RegExp(`^${name}:\\s+(\\d+)$`, 'm').exec(status)?.[1] ?? NaN);
  return count('voluntary_ctxt_switches') + count('nonvoluntary_ctxt_switches');
}

describe('the direct path to the NVML helper', () => {
  it('an await loop of snapshots stays on it: each next call is sent from the last one\'s reactions, and the worker thread sleeps throughout', async () => {
    useScenario({ devices: [simDevice(0), simDevice(1)] });
    const before = helperChildren();
    const session = trackSession(await openNvml({ libraryPath: freshSimulator() }));
    const worker = parentTask(await newHelper(before));
    await session.snapshot({ memoryOnly: true });
    const switched = contextSwitches(worker);
    for (let i = 0; i < 200; i += 1) expect((await session.snapshot({ memoryOnly: true })).devices).toHaveLength(2);
    // A call handed to the worker wakes it (one switch out at least when it sleeps again): 200
    // calls alternating between the paths cost it about 100 wake-ups.
    expect(contextSwitches(worker) - switched).toBeLessThan(5);
  });

  it('answers interleaved asynchronous and blocking calls in the order asked, each with its own result', async () => {
    // Every memory read of GPU 0 takes 150 ms: the first snapshot is still out on the channel
    // while the rest are asked.
    useScenario({
      devices: [simDevice(0), simDevice(1, { processes: [{ pid: 4242, usedBytes: 1 << 30 }] })],
      faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', device: 0, delayMs: 150 }],
    });
    const session = trackSession(await openNvml({ libraryPath: freshSimulator() }));
    const order: string[] = [];
    const first = session.snapshot({ memoryOnly: true }).then((snapshot) => (order.push('first'), snapshot));
    const withProcesses = session.snapshot({ processes: true }).then((snapshot) => (order.push('processes'), snapshot));
    const health = session.health(1).then((reading) => (order.push('health'), reading));
    // Blocking calls wait for the call in flight (as they wait for the worker's) and run then.
    const blocking = session.snapshotSync({ memoryOnly: true, devices: [1] });
    order.push('snapshotSync');
    const memory = session.readMemorySync();
    order.push('readMemorySync');
    const last = session.snapshot({ memoryOnly: true, devices: [1] }).then((snapshot) => (order.push('last'), snapshot));
    const [a, b, h, c] = await Promise.all([first, withProcesses, health, last]);
    expect(order).toEqual(['snapshotSync', 'readMemorySync', 'first', 'processes', 'health', 'last']);
    expect(a.devices.map((device) => device.index)).toEqual([0, 1]);
    expect(b.devices.map((device) => device.index)).toEqual([0, 1]);
    expect(b.devices[1]?.processes?.map((process) => process.pid)).toEqual([4242]);
    expect(h.index).toBe(1);
    expect(blocking.devices.map((device) => device.index)).toEqual([1]);
    expect(c.devices.map((device) => device.index)).toEqual([1]);
    expect(memory.length % 2).toBe(0);
    // Back to idle: the next awaited call goes directly again and answers.
    for (let i = 0; i < 5; i++) expect((await session.snapshot({ memoryOnly: true, devices: [1] })).devices).toHaveLength(1);
    expect(session.closed).toBe(false);
  });

  it('a close asked while a direct call is out waits for it, then shuts the helper down', async () => {
    useScenario({ devices: [simDevice(0)], faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', delayMs: 150 }] });
    const before = helperChildren();
    const session = await openNvml({ libraryPath: freshSimulator() });
    const helper = await newHelper(before);
    const pending = session.snapshot({ memoryOnly: true });
    const closing = session.close();
    expect((await pending).devices).toHaveLength(1);
    await closing;
    await until(() => (exists(helper) ? undefined : true), `helper ${helper} to end`);
  });

  it('a hung direct call misses its deadline: GPUGATE_TIMEOUT naming the call and the helper, which is killed; calls behind it are closed', async () => {
    useScenario({ devices: [simDevice(0), simDevice(1)], faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', device: 1, hang: true }] });
    const before = helperChildren();
    const session = await openNvml({ libraryPath: freshSimulator(), callTimeoutMs: 300 });
    const helper = await newHelper(before);
    const stuck = caught(() => session.snapshot({ memoryOnly: true }));
    const behind = caught(() => session.snapshot());
    const error = await stuck;
    expect(error).toBeInstanceOf(NvmlError);
    expect(error).toMatchObject({ code: 'GPUGATE_TIMEOUT', fn: 'nvmlDeviceGetMemoryInfo_v2', device: 1, helperPid: helper });
    expect(await behind).toMatchObject({ code: 'GPUGATE_SESSION_CLOSED', cause: error });
    expect(session.closed).toBe(true);
    await until(() => (exists(helper) ? undefined : true), `helper ${helper} to be killed and reaped`);
    await session.close();
  });

  it('a blocking call behind a direct call that outlasts the deadline throws GPUGATE_TIMEOUT and poisons the session', async () => {
    useScenario({ devices: [simDevice(0)], faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', delayMs: 3000 }] });
    const before = helperChildren();
    const session = await openNvml({ libraryPath: freshSimulator(), callTimeoutMs: 300 });
    const helper = await newHelper(before);
    const slow = caught(() => session.snapshot({ memoryOnly: true }));
    const thrown = await caught(() => session.snapshotSync({ processes: true }));
    expect(thrown).toMatchObject({ code: 'GPUGATE_TIMEOUT', helperPid: helper });
    expect(await slow).toMatchObject({ code: 'GPUGATE_TIMEOUT' });
    expect(session.closed).toBe(true);
    await until(() => (exists(helper) ? undefined : true), `helper ${helper} to be killed and reaped`);
  });

  it('a helper that crashes during a direct call: GPUGATE_NVML_HELPER_CRASHED naming the signal; a new session works', async () => {
    useScenario({ devices: [simDevice(0)], faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', crash: 'SIGSEGV' }] });
    const before = helperChildren();
    const session = trackSession(await openNvml({ libraryPath: freshSimulator() }));
    const helper = await newHelper(before);
    const crashed = caught(() => session.snapshot({ memoryOnly: true }));
    const behind = caught(() => session.snapshot({ memoryOnly: true }));
    const error = await crashed;
    expect(error).toBeInstanceOf(NvmlError);
    expect(error).toMatchObject({ code: 'GPUGATE_NVML_HELPER_CRASHED' });
    expect((error as Error).message).toMatch(new RegExp(`NVML helper process \\(pid ${helper}\\) was killed by SIGSEGV while answering snapshot`));
    expect(await behind).toMatchObject({ code: 'GPUGATE_SESSION_CLOSED', cause: error });
    expect(await caught(() => session.snapshot())).toMatchObject({ code: 'GPUGATE_SESSION_CLOSED' });
    expect(exists(helper)).toBe(false);

    useScenario({ devices: [simDevice(0)] });
    const again = trackSession(await openNvml({ libraryPath: freshSimulator() }));
    expect((await again.snapshot({ memoryOnly: true })).devices).toHaveLength(1);
  });

  it('an idle session never keeps the process alive; a pending direct call does until it answers', async () => {
    const scenario = useScenario({ devices: [simDevice(0)], faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', delayMs: 200, fromCall: 3 }] });
    // No close(), no exit(): the program ends by itself once nothing is pending.
    const script = `
      const { openNvml } = require(${packageEntryLiteral()});
      openNvml({ libraryPath: ${JSON.stringify(freshSimulator())} }).then(async (session) => {
        for (let i = 0; i < 3; i++) await session.snapshot({ memoryOnly: true });
        session.snapshot({ memoryOnly: true }).then((s) => console.log('answered ' + s.devices.length));
      });`;
    const run = await runNodeScript(script, { ...process.env, GPUGATE_SIM_SCENARIO: scenario }, 30_000);
    expect({ code: run.code, signal: run.signal }, run.stderr).toEqual({ code: 0, signal: null });
    expect(run.stdout.trim()).toBe('answered 1');
  });
});
