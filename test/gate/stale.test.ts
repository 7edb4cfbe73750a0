/**
 * Holder classification with real processes (a live child, a zombie, a reparented orphan, a pid
 * that is gone) listed in a snapshot, and with prepared /proc trees for the cases a test cannot
 * produce for real (a leftover in a service cgroup, state D, the exiting flag, nested namespaces,
 * unreadable descriptors). The same classes through the real addon + simulator are in
 * stale-sim.test.ts.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync, symlinkSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { Snapshot } from '../../src/types';
import { inspectHolders, type Holder } from '../../src/gate/stale';
import { goneProcessPid, killSpawned, spawnOrphan, spawnSleeper, spawnZombie } from '../helpers/processes';
import { ProcRoot, editStat, makeStat } from '../helpers/proc-root';
import { GiB, fakeDevice, fakeMemory, fakeProcesses, fakeSnapshot, type FakeProcess } from '../helpers/fake-snapshot';

/** What systemd puts in the environment of this activation's processes, and of an earlier one's. */
const THIS_ACTIVATION = 'INVOCATION_ID=0123456789abcdef0123456789abcdef\0';
const EARLIER_ACTIVATION = 'INVOCATION_ID=fedcba9876543210fedcba9876543210\0';

function snapshotOf(processes: FakeProcess[], usedBytes = 80 * GiB, minorNumber = 0): Snapshot {
  return fakeSnapshot([fakeDevice({ minorNumber, memory: fakeMemory(usedBytes), processes: fakeProcesses(processes) })]);
}

function byPid(holders: Holder[], pid: number): Holder {
  const holder = holders.find((h) => h.pid === pid);
  if (!holder) throw new Error(`no holder ${pid} in ${JSON.stringify(holders.map((h) => h.pid))}`);
  return holder;
}

const cleanups: Array<() => void> = [];

/** A /dev with the driver's control node, as on a host with a real driver. */
function driverDevRoot(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'gpugate-dev-'));
  writeFileSync(path.join(dir, 'nvidiactl'), '');
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}
afterEach(async () => {
  await killSpawned();
  for (const cleanup of cleanups.splice(0)) cleanup();
});

describe('inspectHolders with real processes', () => {
  it('classifies a live child as active, a zombie, a reparented orphan and a gone pid', async () => {
    const live = await spawnSleeper();
    const zombie = await spawnZombie();
    const orphan = await spawnOrphan('VLLM::Worker_TP6');
    const gone = await goneProcessPid();
    const snapshot = snapshotOf([
      { pid: live, usedBytes: 20 * GiB },
      { pid: zombie.zombiePid, usedBytes: 20 * GiB },
      { pid: orphan.pid, usedBytes: 20 * GiB },
      { pid: gone, usedBytes: 20 * GiB },
    ]);
    const report = await inspectHolders(snapshot, { unitCgroup: null, reaperPids: [orphan.reaperPid], shmPatterns: [], devRoot: driverDevRoot() });

    const active = byPid(report.holders, live);
    expect(active).toMatchObject({ class: 'active', comm: 'sleep', ppid: process.pid, usedBytes: 20 * GiB, gpus: [0] });
    expect(active.reason).toMatch(/no \/dev\/nvidia\* descriptor/);
    expect(active.startTime).toBeGreaterThan(Date.now() - 600_000);

    const z = byPid(report.holders, zombie.zombiePid);
    expect(z).toMatchObject({ class: 'zombie', state: 'Z', ppid: zombie.parentPid });
    expect(z.reason).toContain(`parent ${zombie.parentPid} (python3)`);

    const o = byPid(report.holders, orphan.pid);
    expect(o).toMatchObject({ class: 'orphan', ppid: orphan.reaperPid });
    expect(o.cmdline).toMatch(/^VLLM::Worker_TP6/);

    expect(byPid(report.holders, gone)).toMatchObject({ class: 'gone', state: null, comm: null });
    expect(report.perGpu).toEqual([{ index: 0, unattributedBytes: 0, hiddenHolders: [] }]);
    expect(report.unitCgroup).toBeNull();
  });

  it('every readable holder carries its owner: uid named from the passwd file given, age at the snapshot, whole argv; a gone one none', async () => {
    const live = await spawnSleeper('VLLM::Worker_TP0');
    const gone = await goneProcessPid();
    const passwd = path.join(mkdtempSync(path.join(tmpdir(), 'gpugate-passwd-')), 'passwd');
    cleanups.push(() => rmSync(path.dirname(passwd), { recursive: true, force: true }));
    writeFileSync(passwd, `operator-of-test:x:${process.getuid!()}:0::/:/bin/sh\n`);
    const snapshot = snapshotOf([{ pid: live, usedBytes: GiB }, { pid: gone, usedBytes: GiB }]);
    const report = await inspectHolders(snapshot, { unitCgroup: null, shmPatterns: [], scanHidden: false, passwdPath: passwd });
    const owner = byPid(report.holders, live).owner!;
    expect(owner).toMatchObject({ uid: process.getuid!(), user: 'operator-of-test', argv: ['VLLM::Worker_TP0', '120'] });
    expect(owner.startedAt).toBe(byPid(report.holders, live).startTime);
    expect(owner.ageMs).toBe(Math.max(0, snapshot.takenAt - owner.startedAt!));
    expect(byPid(report.holders, gone).owner).toBeNull();
  });

  it('an orphan is only an orphan when its command line looks like an engine worker', async () => {
    const orphan = await spawnOrphan('plain-sleeper');
    const report = await inspectHolders(snapshotOf([{ pid: orphan.pid, usedBytes: GiB }]), { unitCgroup: null, reaperPids: [orphan.reaperPid], shmPatterns: [], scanHidden: false });
    expect(byPid(report.holders, orphan.pid).class).toBe('active');
  });

  it('with an explicit unit cgroup, a live holder elsewhere is foreign and the caller is never a leftover', async () => {
    const live = await spawnSleeper();
    const report = await inspectHolders(snapshotOf([{ pid: live, usedBytes: GiB }, { pid: process.pid, usedBytes: GiB }]), {
      unitCgroup: '/system.slice/gpugate-test-nonexistent.service',
      shmPatterns: [],
      scanHidden: false,
    });
    expect(byPid(report.holders, live)).toMatchObject({ class: 'foreign' });
    expect(byPid(report.holders, process.pid)).toMatchObject({ class: 'active', reason: expect.stringMatching(/gpugate itself/) });
  });

  it('memory no listed process accounts for is unattributed', async () => {
    const live = await spawnSleeper();
    const report = await inspectHolders(snapshotOf([{ pid: live, usedBytes: 30 * GiB }], 80 * GiB), { unitCgroup: null, shmPatterns: [], scanHidden: false });
    expect(report.perGpu[0]!.unattributedBytes).toBe(50 * GiB);
  });
});

describe('inspectHolders with prepared /proc trees', () => {
  function prepared(unitPath: string): ProcRoot {
    const root = new ProcRoot();
    cleanups.push(() => root.remove());
    root.add({ pid: process.pid, copyFrom: process.pid, cgroup: `0::${unitPath}\n`, status: 'Name:\tnode\nNSpid:\t' + process.pid + '\n', environ: THIS_ACTIVATION });
    return root;
  }

  it('a process in the caller\'s own service cgroup is a leftover (unit detected from the caller\'s cgroup)', async () => {
    const leftover = await spawnSleeper('VLLM::Worker_TP0');
    const other = await spawnSleeper();
    const root = prepared('/system.slice/vllm.service');
    root.add({ pid: leftover, copyFrom: leftover, cgroup: '0::/system.slice/vllm.service\n', fds: { '3': '/dev/nvidiactl', '4': '/dev/nvidia0' }, environ: EARLIER_ACTIVATION });
    root.add({ pid: other, copyFrom: other, cgroup: '0::/system.slice/other.service\n', fds: { '3': '/dev/nvidia0' } });
    const report = await inspectHolders(snapshotOf([{ pid: leftover, usedBytes: GiB }, { pid: other, usedBytes: GiB }]), {
      procRoot: root.root,
      cgroupRoot: path.join(root.root, 'no-cgroupfs'),
      shmPatterns: [],
    });
    expect(report.unitCgroup).toBe('/system.slice/vllm.service');
    const l = byPid(report.holders, leftover);
    expect(l).toMatchObject({ class: 'leftover', unit: 'vllm.service', cgroup: '/system.slice/vllm.service' });
    expect(l.reason).not.toMatch(/suspect/);
    expect(byPid(report.holders, other)).toMatchObject({ class: 'foreign', unit: 'other.service' });
    // Without a readable cgroupfs, the unit's members come from /proc/PID/cgroup: the caller is not one.
    expect(report.unitProcesses).toEqual([{ pid: leftover, comm: 'sleep', cmdline: expect.stringMatching(/^VLLM::Worker_TP0/), state: 'S', listed: true }]);
  });

  it('a process of the unit that started after the snapshot (pid reuse?) is never a leftover: unverifiable', async () => {
    const snapshotTakenAt = Date.now() - 60_000;
    const late = await spawnSleeper('VLLM::Worker_TP0');
    const root = prepared('/system.slice/vllm.service');
    root.add({ pid: late, copyFrom: late, cgroup: '0::/system.slice/vllm.service\n', fds: { '4': '/dev/nvidia0' }, environ: EARLIER_ACTIVATION });
    const snapshot = fakeSnapshot([fakeDevice({ minorNumber: 0, memory: fakeMemory(80 * GiB), processes: fakeProcesses([{ pid: late, usedBytes: GiB }]) })], snapshotTakenAt);
    const report = await inspectHolders(snapshot, { procRoot: root.root, cgroupRoot: path.join(root.root, 'no-cgroupfs'), shmPatterns: [], scanHidden: false });
    expect(byPid(report.holders, late)).toMatchObject({ class: 'unverifiable', reason: expect.stringMatching(/identity is in doubt.*suspect: started after the snapshot/) });
  });

  it('an INVOCATION_ID that is not one (the remains of a title written over the environment) does not count as an earlier activation', async () => {
    const worker = await spawnSleeper('VLLM::Worker_TP0');
    const root = prepared('/system.slice/vllm.service');
    root.add({ pid: worker, copyFrom: worker, cgroup: '0::/system.slice/vllm.service\n', fds: { '4': '/dev/nvidia0' }, environ: '\0\0INVOCATION_ID=_TP0 --model /m\0\0' });
    const report = await inspectHolders(snapshotOf([{ pid: worker, usedBytes: GiB }]), { procRoot: root.root, cgroupRoot: path.join(root.root, 'no-cgroupfs'), shmPatterns: [], scanHidden: false });
    // It started after gpugate's own process, the activation's first one here: which activation started it cannot be told.
    expect(byPid(report.holders, worker)).toMatchObject({ class: 'unverifiable', reason: expect.stringMatching(/shows an INVOCATION_ID that is not one \("_TP0 --model \/m"; systemd writes 32 hex digits\).*not before this activation/) });
  });

  it('lists every other process of the unit cgroup from cgroup.procs, listed by NVML or not', async () => {
    const listedPid = await spawnSleeper('VLLM::Worker_TP0');
    const unlisted = await spawnSleeper('VLLM::Worker_TP1');
    const root = prepared('/system.slice/vllm.service');
    root.add({ pid: listedPid, copyFrom: listedPid, cgroup: '0::/system.slice/vllm.service\n', fds: { '4': '/dev/nvidia0' }, environ: EARLIER_ACTIVATION });
    root.add({ pid: unlisted, copyFrom: unlisted, cgroup: '0::/system.slice/vllm.service/worker\n', fds: {}, environ: EARLIER_ACTIVATION });
    const cgroupRoot = mkdtempSync(path.join(tmpdir(), 'gpugate-cgroup-'));
    cleanups.push(() => rmSync(cgroupRoot, { recursive: true, force: true }));
    const unit = path.join(cgroupRoot, 'system.slice', 'vllm.service');
    mkdirSync(path.join(unit, 'worker'), { recursive: true });
    writeFileSync(path.join(unit, 'cgroup.procs'), `${process.pid}\n${listedPid}\n`);
    writeFileSync(path.join(unit, 'worker', 'cgroup.procs'), `${unlisted}\n`);
    const report = await inspectHolders(snapshotOf([{ pid: listedPid, usedBytes: GiB }]), { procRoot: root.root, cgroupRoot, shmPatterns: [], scanHidden: false });
    expect(report.unitProcesses.map((p) => [p.pid, p.listed])).toEqual([
      [listedPid, true],
      [unlisted, false],
    ]);
    expect(byPid(report.holders, listedPid).class).toBe('leftover');
  });

  it('a login session or a container root cgroup makes nothing a leftover', async () => {
    const pid = await spawnSleeper();
    for (const unitPath of ['/user.slice/user-1000.slice/session-4.scope', '/']) {
      const root = prepared(unitPath);
      root.add({ pid, copyFrom: pid, cgroup: `0::${unitPath}\n`, fds: { '4': '/dev/nvidia0' } });
      const report = await inspectHolders(snapshotOf([{ pid, usedBytes: GiB }]), { procRoot: root.root, shmPatterns: [], scanHidden: false });
      expect(report.unitCgroup).toBeNull();
      expect(byPid(report.holders, pid).class).toBe('active');
    }
  });

  it('state D and the exiting flag are draining; a zombie leader with live threads is still a holder', async () => {
    const root = prepared('/');
    const now = await spawnSleeper();
    const real = (await import('node:fs')).readFileSync(`/proc/${now}/stat`, 'utf8');
    root.add({ pid: 901, stat: editStat(real.replace(`${now} (`, '901 ('), { 3: 'D' }), fds: {} });
    root.add({ pid: 902, stat: editStat(real.replace(`${now} (`, '902 ('), { 3: 'S', 9: 0x400104 }), fds: {} });
    root.add({ pid: 903, stat: makeStat(903, 'python3', { 3: 'Z', 4: 1 }), tasks: { '903': makeStat(903, 'python3', { 3: 'Z' }), '904': makeStat(904, 'python3', { 3: 'S' }) } });
    const report = await inspectHolders(snapshotOf([901, 902, 903].map((pid) => ({ pid, usedBytes: GiB }))), { procRoot: root.root, shmPatterns: [], scanHidden: false });
    expect(byPid(report.holders, 901)).toMatchObject({ class: 'draining', state: 'D', reason: expect.stringMatching(/state D/) });
    expect(byPid(report.holders, 902)).toMatchObject({ class: 'draining', reason: expect.stringMatching(/PF_EXITING/) });
    expect(byPid(report.holders, 903)).toMatchObject({ class: 'zombie_live_threads', reason: expect.stringMatching(/1 thread/) });
  });

  it('in a nested PID namespace every host pid is unverifiable, never gone', async () => {
    const root = new ProcRoot();
    cleanups.push(() => root.remove());
    root.add({ pid: process.pid, copyFrom: process.pid, cgroup: '0::/\n', status: `Name:\tnode\nNSpid:\t${process.pid}\t7\n` });
    const gone = await goneProcessPid();
    const report = await inspectHolders(snapshotOf([{ pid: gone, usedBytes: GiB }, { pid: process.pid, usedBytes: GiB }]), { procRoot: root.root, shmPatterns: [], scanHidden: false });
    expect(report.nestedPidNamespace).toBe(true);
    for (const holder of report.holders) {
      expect(holder.class).toBe('unverifiable');
      expect(holder.reason).toMatch(/nested PID namespace/);
    }
  });

  it('with procfs mounted hidepid=2, a pid missing from /proc is unverifiable, not gone', async () => {
    const root = prepared('/');
    writeFileSync(path.join(root.root, String(process.pid), 'mountinfo'), '22 27 0:21 / /proc rw,relatime - proc proc rw,hidepid=2\n');
    const gone = await goneProcessPid();
    const report = await inspectHolders(snapshotOf([{ pid: gone, usedBytes: GiB }]), { procRoot: root.root, shmPatterns: [], scanHidden: false });
    expect(byPid(report.holders, gone)).toMatchObject({ class: 'unverifiable', reason: expect.stringMatching(/hidepid=2/) });
  });

  it('an unreadable descriptor table makes a live holder unverifiable with the reason; a bad stat too', async () => {
    const pid = await spawnSleeper();
    const root = prepared('/');
    root.add({ pid, copyFrom: pid, cgroup: '0::/\n', fds: 'not-a-directory' });
    root.add({ pid: 905, stat: '905 (broken', fds: {} });
    const report = await inspectHolders(snapshotOf([{ pid, usedBytes: GiB }, { pid: 905, usedBytes: GiB }]), { procRoot: root.root, shmPatterns: [], scanHidden: false });
    expect(byPid(report.holders, pid)).toMatchObject({ class: 'unverifiable', reason: expect.stringMatching(/cannot read .*fd: ENOTDIR/) });
    expect(byPid(report.holders, 905)).toMatchObject({ class: 'unverifiable', reason: expect.stringMatching(/malformed/) });
  });

  it('a holder with /dev/nvidia* only mapped (no descriptor) is not suspect; one with neither is', async () => {
    const mapped = await spawnSleeper();
    const bare = await spawnSleeper();
    const root = prepared('/');
    root.add({ pid: mapped, copyFrom: mapped, fds: { '0': '/dev/null' }, maps: '7f00-7f01 rw-s 00000000 00:05 12 /dev/nvidia0\n' });
    root.add({ pid: bare, copyFrom: bare, fds: { '0': '/dev/null' }, maps: '7f00-7f01 r--p 00000000 08:01 9 /usr/bin/sleep\n' });
    const report = await inspectHolders(snapshotOf([{ pid: mapped, usedBytes: GiB }, { pid: bare, usedBytes: GiB }]), { procRoot: root.root, shmPatterns: [], scanHidden: false, devRoot: driverDevRoot() });
    expect(byPid(report.holders, mapped).reason).not.toMatch(/suspect/);
    expect(byPid(report.holders, bare).reason).toMatch(/suspect: no \/dev\/nvidia\* descriptor/);
  });

  it('on a host without the driver\'s device nodes (the simulator) a missing descriptor is no suspicion', async () => {
    const orphan = await spawnOrphan('VLLM::Worker_TP6');
    const noDriver = mkdtempSync(path.join(tmpdir(), 'gpugate-dev-'));
    cleanups.push(() => rmSync(noDriver, { recursive: true, force: true }));
    const report = await inspectHolders(snapshotOf([{ pid: orphan.pid, usedBytes: GiB }]), { unitCgroup: null, reaperPids: [orphan.reaperPid], shmPatterns: [], devRoot: noDriver });
    const holder = byPid(report.holders, orphan.pid);
    expect(holder.class).toBe('orphan');
    expect(holder.reason).toBe(`engine worker reparented to ${orphan.reaperPid}: its launcher is gone`);
  });

  it('a holder that started after the snapshot is flagged as pid reuse', async () => {
    const pid = await spawnSleeper();
    const snapshot = snapshotOf([{ pid, usedBytes: GiB }]);
    snapshot.takenAt = Date.now() - 3_600_000;
    const report = await inspectHolders(snapshot, { unitCgroup: null, shmPatterns: [], scanHidden: false });
    expect(byPid(report.holders, pid).reason).toMatch(/started after the snapshot/);
  });

  it('finds hidden holders: /dev/nvidiaN open or mapped by a process NVML does not list', async () => {
    const root = prepared('/');
    const listed = await spawnSleeper();
    const hiddenFd = await spawnSleeper();
    const hiddenMap = await spawnSleeper();
    root.add({ pid: listed, copyFrom: listed, fds: { '3': '/dev/nvidia2' } });
    root.add({ pid: hiddenFd, copyFrom: hiddenFd, fds: { '3': '/dev/nvidiactl', '4': '/dev/nvidia2' } });
    root.add({ pid: hiddenMap, copyFrom: hiddenMap, fds: {}, maps: '7f00-7f01 rw-s 00000000 00:05 12 /dev/nvidia2\n' });
    root.add({ pid: 906, stat: makeStat(906, 'nvidia-smi'), fds: { '3': '/dev/nvidiactl', '4': '/dev/nvidia1' } });
    // The listed process explains all used memory, where a default call skips this search (inspect-cost.test.ts): ask for it.
    const report = await inspectHolders(snapshotOf([{ pid: listed, usedBytes: GiB }], GiB, 2), { procRoot: root.root, shmPatterns: [], scanHidden: true });
    const hidden = report.perGpu[0]!.hiddenHolders.sort((a, b) => a.pid - b.pid);
    expect(hidden).toEqual(
      [
        { pid: hiddenFd, comm: 'sleep', cmdline: 'sleep 120', owner: expect.objectContaining({ uid: process.getuid!(), argv: ['sleep', '120'] }), via: ['fd'] },
        { pid: hiddenMap, comm: 'sleep', cmdline: 'sleep 120', owner: expect.objectContaining({ uid: process.getuid!(), argv: ['sleep', '120'] }), via: ['maps'] },
      ].sort((a, b) => a.pid - b.pid),
    );
  });

  it('reports leaked /dev/shm segments (matching, unowned, regular files) with sizes and tmpfs space', async () => {
    const shm = mkdtempSync(path.join(tmpdir(), 'gpugate-shm-'));
    cleanups.push(() => rmSync(shm, { recursive: true, force: true }));
    writeFileSync(path.join(shm, 'nccl-leaked'), Buffer.alloc(8192));
    writeFileSync(path.join(shm, 'psm_owned'), Buffer.alloc(100));
    writeFileSync(path.join(shm, 'unrelated'), Buffer.alloc(100));
    mkdirSync(path.join(shm, 'sgl_shm_mm_dir'));
    symlinkSync('/etc/hostname', path.join(shm, 'vllm_offload_link'));
    const root = prepared('/');
    const owner = await spawnSleeper();
    root.add({ pid: owner, copyFrom: owner, fds: { '5': path.join(shm, 'psm_owned') } });
    const report = await inspectHolders(snapshotOf([]), { procRoot: root.root, shmRoot: shm, scanHidden: false });
    expect(report.shm.leaked).toEqual([{ path: path.join(shm, 'nccl-leaked'), name: 'nccl-leaked', sizeBytes: 8192, allocatedBytes: expect.any(Number) }]);
    expect(report.shm.tmpfsFreeBytes).toBeGreaterThan(0);
    expect(report.shm.tmpfsTotalBytes).toBeGreaterThanOrEqual(report.shm.tmpfsFreeBytes!);
  });
});
