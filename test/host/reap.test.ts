/**
 * reapStale signals only proven leftovers, with real processes: SIGTERM then SIGKILL after the
 * grace; never PID 1, the caller, its parent, a foreign or draining process; dryRun signals nothing.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { Snapshot } from '../../src/types';
import { inspectHolders, type Holder, type HolderReport } from '../../src/gate/stale';
import { reapStale } from '../../src/gate/reap';
import { readBootTimeMs, readProcess, startTimeMsOf } from '../../src/host/procfs';
import { isAlive, killSpawned, spawnSleeper } from '../helpers/processes';
import { ProcRoot, editStat } from '../helpers/proc-root';
import { GiB, fakeDevice, fakeMemory, fakeProcesses, fakeSnapshot } from '../helpers/fake-snapshot';

const cleanups: Array<() => void> = [];
afterEach(async () => {
  await killSpawned();
  for (const cleanup of cleanups.splice(0)) cleanup();
});

function snapshotOf(pids: number[]): Snapshot {
  const device = fakeDevice({ memory: fakeMemory(10 * GiB), processes: fakeProcesses(pids.map((pid) => ({ pid, usedBytes: GiB }))) });
  return fakeSnapshot([device]);
}

/** A prepared /proc where the caller runs in vllm.service and `leftovers` share that cgroup. */
function serviceRoot(leftovers: number[], foreign: number[]): ProcRoot {
  const root = new ProcRoot();
  cleanups.push(() => root.remove());
  // systemd gives each activation its own INVOCATION_ID: the leftovers carry an earlier one.
  root.add({ pid: process.pid, copyFrom: process.pid, cgroup: '0::/system.slice/vllm.service\n', status: `Name:\tnode\nNSpid:\t${process.pid}\n`, environ: 'INVOCATION_ID=0123456789abcdef0123456789abcdef\0' });
  for (const pid of leftovers) root.add({ pid, copyFrom: pid, cgroup: '0::/system.slice/vllm.service\n', fds: { '4': '/dev/nvidia0' }, environ: 'INVOCATION_ID=fedcba9876543210fedcba9876543210\0' });
  for (const pid of foreign) root.add({ pid, copyFrom: pid, cgroup: '0::/system.slice/other.service\n', fds: { '4': '/dev/nvidia0' } });
  return root;
}

function holder(pid: number, klass: Holder['class']): Holder {
  return { pid, class: klass, gpus: [0], usedBytes: GiB, usedBytesPerGpu: [{ gpu: 0, usedBytes: GiB }], comm: null, cmdline: null, state: 'S', ppid: null, cgroup: null, unit: null, startTime: null, owner: null, reason: 'test' };
}

/** A real process's start time, as classification records it. */
async function realStartTime(pid: number): Promise<number> {
  const info = await readProcess(pid);
  if (info.kind !== 'ok') throw new Error(`pid ${pid} is not readable`);
  return startTimeMsOf(info.stat, (await readBootTimeMs())!);
}

function reportOf(holders: Holder[]): HolderReport {
  return { holders, perGpu: [], shm: { leaked: [], tmpfsFreeBytes: null, tmpfsTotalBytes: null }, unitCgroup: null, nestedPidNamespace: false, unitProcesses: [],
    scans: { unexplainedGpus: [], hiddenHolders: false, shm: false, openFiles: false, context: 'given' } };
}

describe('reapStale', () => {
  it('SIGTERMs a leftover, leaves the foreign holder alone', async () => {
    const leftover = await spawnSleeper('VLLM::Worker_TP0');
    const foreign = await spawnSleeper();
    const root = serviceRoot([leftover], [foreign]);
    const report = await inspectHolders(snapshotOf([leftover, foreign]), { procRoot: root.root, shmPatterns: [], scanHidden: false });
    expect(report.holders.map((h) => h.class).sort()).toEqual(['foreign', 'leftover']);
    const actions = await reapStale(report, { procRoot: root.root, graceMs: 300 });
    expect(actions.find((a) => a.pid === foreign)).toMatchObject({ signal: null, result: 'skipped' });
    const reaped = actions.find((a) => a.pid === leftover)!;
    expect(reaped.signal).not.toBeNull();
    expect(['exited', 'signalled']).toContain(reaped.result);
    expect(isAlive(leftover)).toBe(false);
    expect(isAlive(foreign)).toBe(true);
  });

  it('escalates to SIGKILL when a leftover ignores SIGTERM', async () => {
    const stubborn = spawn('bash', ['-c', 'trap "" TERM; while :; do sleep 0.05; done'], { stdio: 'ignore' });
    const pid = stubborn.pid!;
    cleanups.push(() => {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    });
    await new Promise((resolve) => setTimeout(resolve, 200));
    const actions = await reapStale(reportOf([{ ...holder(pid, 'leftover'), startTime: await realStartTime(pid) }]), { graceMs: 300 });
    expect(actions).toEqual([{ pid, signal: 'SIGKILL', sent: ['SIGTERM', 'SIGKILL'], result: 'signalled', reason: expect.stringMatching(/still alive 300 ms after SIGTERM/) }]);
    await new Promise((resolve) => stubborn.once('exit', resolve));
  });

  it('never signals PID 1, itself or its parent, even when they are called leftovers', async () => {
    const actions = await reapStale(reportOf([holder(1, 'leftover'), holder(process.pid, 'leftover'), holder(process.ppid, 'leftover')]), { graceMs: 100 });
    expect(actions.map((a) => [a.pid, a.result, a.signal])).toEqual([
      [1, 'skipped', null],
      [process.pid, 'skipped', null],
      [process.ppid, 'skipped', null],
    ]);
    expect(actions[2]!.reason).toMatch(/ancestor/);
    expect(isAlive(process.ppid)).toBe(true);
  });

  it('never signals a foreign, active, orphan or draining holder', async () => {
    const pids = await Promise.all([spawnSleeper(), spawnSleeper(), spawnSleeper('VLLM::Worker_TP1')]);
    const actions = await reapStale(reportOf([holder(pids[0]!, 'foreign'), holder(pids[1]!, 'active'), holder(pids[2]!, 'orphan')]), { graceMs: 100 });
    expect(actions.every((a) => a.result === 'skipped' && a.signal === null)).toBe(true);
    for (const pid of pids) expect(isAlive(pid)).toBe(true);

    // A leftover that is now in state D is waited for, not signalled.
    const draining = await spawnSleeper();
    const root = new ProcRoot();
    cleanups.push(() => root.remove());
    root.add({ pid: draining, stat: editStat(readFileSync(`/proc/${draining}/stat`, 'utf8'), { 3: 'D' }), fds: {} });
    const [action] = await reapStale(reportOf([holder(draining, 'leftover')]), { procRoot: root.root, graceMs: 100 });
    expect(action).toMatchObject({ result: 'skipped', signal: null, reason: expect.stringMatching(/draining/) });
    expect(isAlive(draining)).toBe(true);
  });

  it('dryRun signals nothing and says what it would do', async () => {
    const leftover = await spawnSleeper('VLLM::Worker_TP0');
    const root = serviceRoot([leftover], []);
    const report = await inspectHolders(snapshotOf([leftover]), { procRoot: root.root, shmPatterns: [], scanHidden: false });
    const actions = await reapStale(report, { procRoot: root.root, graceMs: 100, dryRun: true });
    expect(actions).toEqual([{ pid: leftover, signal: 'SIGTERM', sent: [], result: 'would-signal', reason: expect.stringMatching(/dry run/) }]);
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(isAlive(leftover)).toBe(true);
  });

  it('skips a leftover whose pid was reused (start time differs)', async () => {
    const pid = await spawnSleeper();
    const report = reportOf([{ ...holder(pid, 'leftover'), startTime: 12345 }]);
    const [action] = await reapStale(report, { graceMs: 100 });
    expect(action).toMatchObject({ result: 'skipped', reason: expect.stringMatching(/reused/) });
    expect(isAlive(pid)).toBe(true);
  });

  it('rejects a bad grace period with a clear error', async () => {
    await expect(reapStale(reportOf([]), { graceMs: -1 })).rejects.toThrow(/graceMs/);
  });
});
