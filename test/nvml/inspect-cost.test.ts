/**
 * What inspectHolders reads by default, through the real addon and the simulator with real
 * processes: where the listed processes explain a GPU's used memory it reads no process's open
 * files (a hidden /dev/nvidia holder and a leaked /dev/shm file planted in a prepared /proc stay
 * unseen, and the report says which scans ran); where memory is unexplained, or the caller asks,
 * it searches and finds both. The caller's facts are reused by a later call while the caller's
 * ancestors are unchanged, and read again once its parent has died.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { inspectHolders, prepareInspectContext } from '../../src/gate/stale';
import { openNvml } from '../../src/nvml/session';
import type { NvmlSession, Snapshot } from '../../src/types';
import { isAlive, killSpawned, procPpid, spawnSleeper, until } from '../helpers/processes';
import { ProcRoot } from '../helpers/proc-root';
import { makeTestTempDir } from '../helpers/temp-root';
import { freshSimulator, GiB, useScenario } from '../helpers/session-helpers';

const cleanups: Array<() => void> = [];
afterEach(async () => {
  await killSpawned();
  for (const cleanup of cleanups.splice(0)) cleanup();
});

function gpu(index: number, usedBytes: number, processes: Array<{ pid: number; usedBytes: number }>): Record<string, unknown> {
  return {
    name: 'NVIDIA RTX PRO 6000 Blackwell Server Edition',
    uuid: `GPU-${String(index).padStart(8, '0')}-aaaa-bbbb-cccc-dddddddddddd`,
    pciBusId: `00000000:${(0x18 + index * 0x10).toString(16).toUpperCase()}:00.0`,
    minorNumber: index,
    computeCapability: [12, 0],
    memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes },
    persistenceMode: true,
    computeMode: 'default',
    migMode: false,
    processes: processes.map((p) => ({ ...p, name: 'python3', kinds: ['compute'] })),
  };
}

/** A real session's snapshot with process lists, of the scenario as given. */
async function snapshotOf(scenario: unknown): Promise<Snapshot> {
  useScenario(scenario);
  let session: NvmlSession | null = null;
  try {
    session = await openNvml({ libraryPath: freshSimulator() });
    return await session.snapshot({ processes: true });
  } finally {
    await session?.close();
  }
}

describe('inspectHolders reads open files only where memory is unexplained', () => {
  it('skips the fd and /dev/shm searches on a GPU its listed processes explain, and runs both on one they do not', async () => {
    const onExplained = await spawnSleeper('python3');
    const onUnexplained = await spawnSleeper('python3');
    const hidden = await spawnSleeper('hidden');
    // GPU 0: used is what its process holds plus 100 MiB (within the tolerance); GPU 1: 4 GiB that nobody listed holds.
    const snapshot = await snapshotOf({
      devices: [
        gpu(0, 10 * GiB + 100 * 2 ** 20, [{ pid: onExplained, usedBytes: 10 * GiB }]),
        gpu(1, 14 * GiB, [{ pid: onUnexplained, usedBytes: 10 * GiB }]),
      ],
    });
    const shm = makeTestTempDir('gpugate-shm-');
    cleanups.push(() => rmSync(shm, { recursive: true, force: true }));
    writeFileSync(path.join(shm, 'nccl-leaked'), Buffer.alloc(4096));
    writeFileSync(path.join(shm, 'psm_held'), Buffer.alloc(4096));
    const root = new ProcRoot();
    cleanups.push(() => root.remove());
    root.add({ pid: process.pid, copyFrom: process.pid, cgroup: '0::/\n' });
    root.add({ pid: onExplained, copyFrom: onExplained, fds: { '3': '/dev/nvidiactl', '4': '/dev/nvidia0' } });
    root.add({ pid: onUnexplained, copyFrom: onUnexplained, fds: { '3': '/dev/nvidiactl', '4': '/dev/nvidia1' } });
    // Listed nowhere, holding both GPUs' device nodes and one of the shm files.
    root.add({ pid: hidden, copyFrom: hidden, fds: { '3': '/dev/nvidia0', '4': '/dev/nvidia1', '5': path.join(shm, 'psm_held') } });
    const roots = { procRoot: root.root, shmRoot: shm, cgroupRoot: path.join(root.root, 'no-cgroupfs'), unitCgroup: null };

    const cheap = await inspectHolders(snapshot, { ...roots, devices: [0] });
    expect(cheap.holders.map((h) => [h.pid, h.class])).toEqual([[onExplained, 'active']]);
    expect(cheap.scans).toEqual({ unexplainedGpus: [], hiddenHolders: false, shm: false, openFiles: false, context: 'read' });
    expect(cheap.perGpu).toEqual([{ index: 0, unattributedBytes: 100 * 2 ** 20, hiddenHolders: [] }]);
    expect(cheap.shm.leaked).toEqual([]);

    // The same call again reuses the caller's facts.
    expect((await inspectHolders(snapshot, { ...roots, devices: [0] })).scans.context).toBe('reused');

    // Asked for, the searches run on the explained GPU too, and find what the default call passed over.
    const deep = await inspectHolders(snapshot, { ...roots, devices: [0], scanHidden: true, scanShm: true });
    expect(deep.scans).toMatchObject({ unexplainedGpus: [], hiddenHolders: true, shm: true, openFiles: true });
    expect(deep.perGpu[0]!.hiddenHolders.map((h) => [h.pid, h.via])).toEqual([[hidden, ['fd']]]);
    expect(deep.shm.leaked.map((entry) => entry.name)).toEqual(['nccl-leaked']);

    // Unexplained memory: the default call searches by itself.
    const searched = await inspectHolders(snapshot, { ...roots, devices: [1] });
    expect(searched.scans).toMatchObject({ unexplainedGpus: [1], hiddenHolders: true, shm: true, openFiles: true });
    expect(searched.perGpu).toEqual([{ index: 1, unattributedBytes: 4 * GiB, hiddenHolders: [expect.objectContaining({ pid: hidden, comm: 'sleep', via: ['fd'] })] }]);
    expect(searched.shm.leaked.map((entry) => entry.name)).toEqual(['nccl-leaked']);
  });

  it('a /dev/shm search with no matching file reads no process\'s open files', async () => {
    const listed = await spawnSleeper('python3');
    const snapshot = await snapshotOf({ devices: [gpu(0, 10 * GiB, [{ pid: listed, usedBytes: 10 * GiB }])] });
    const shm = makeTestTempDir('gpugate-shm-');
    cleanups.push(() => rmSync(shm, { recursive: true, force: true }));
    mkdirSync(path.join(shm, 'unrelated-dir'));
    writeFileSync(path.join(shm, 'unrelated'), '');
    const report = await inspectHolders(snapshot, { shmRoot: shm, unitCgroup: null, scanShm: true });
    expect(report.scans).toMatchObject({ hiddenHolders: false, shm: true, openFiles: false });
    expect(report.shm.tmpfsTotalBytes).toBeGreaterThan(0);
  });
});

describe("inspectHolders reuses the caller's facts", () => {
  it('while its ancestors are unchanged, and reads them again once its parent has died', async () => {
    const listed = await spawnSleeper('python3');
    const snapshot = await snapshotOf({ devices: [gpu(0, 10 * GiB, [{ pid: listed, usedBytes: 10 * GiB }])] });
    // A caller (a sleep) whose parent (a shell) the test can kill.
    const shell = spawn('bash', ['-c', 'sleep 120 & echo $!; wait'], { stdio: ['ignore', 'pipe', 'ignore'] });
    let caller = 0;
    shell.stdout.setEncoding('utf8').on('data', (text: string) => (caller = Number.parseInt(text, 10)));
    cleanups.push(() => {
      for (const pid of [caller, shell.pid!]) if (pid > 0 && isAlive(pid)) process.kill(pid, 'SIGKILL');
    });
    await until('the caller to start', () => caller > 0 && procPpid(caller) === shell.pid);
    const options = { selfPid: caller, unitCgroup: null, shmPatterns: [] };

    expect((await inspectHolders(snapshot, options)).scans.context).toBe('read');
    expect((await inspectHolders(snapshot, options)).scans.context).toBe('reused');
    // Other roots or another caller: facts of their own.
    expect((await inspectHolders(snapshot, { ...options, selfPid: process.pid })).scans.context).toBe('read');
    expect((await inspectHolders(snapshot, options)).scans.context).toBe('read');
    expect((await inspectHolders(snapshot, options)).scans.context).toBe('reused');

    process.kill(shell.pid!, 'SIGKILL');
    await until('the caller to be reparented', () => procPpid(caller) !== shell.pid);
    const after = await inspectHolders(snapshot, options);
    expect(after.scans.context).toBe('read');
    // Its former parent is no longer among the protected ancestors: the facts are the new ones.
    expect(after.holders.map((h) => [h.pid, h.class])).toEqual([[listed, 'active']]);
  });

  it('rejects a scan option that is not true, false or \'unexplained\', naming it', async () => {
    const snapshot = await snapshotOf({ devices: [gpu(0, 0, [])] });
    await expect(inspectHolders(snapshot, { scanHidden: 'yes' as unknown as boolean })).rejects.toThrow(/option scanHidden must be true, false or 'unexplained', got "yes"/);
    await expect(inspectHolders(snapshot, { scanShm: 1 as unknown as boolean })).rejects.toThrow(/option scanShm must be true, false or 'unexplained', got 1/);
    await expect(inspectHolders(snapshot, { scanShm: 1 as unknown as boolean })).rejects.toMatchObject({ name: 'ConfigError', code: 'GPUGATE_CONFIG', option: 'scanShm' });
  });

  it('a context the caller hands in is used as given', async () => {
    const listed = await spawnSleeper('python3');
    const snapshot = await snapshotOf({ devices: [gpu(0, 10 * GiB, [{ pid: listed, usedBytes: 10 * GiB }])] });
    const context = await prepareInspectContext({ unitCgroup: null });
    expect((await inspectHolders(snapshot, { context, shmPatterns: [] })).scans.context).toBe('given');
  });
});
