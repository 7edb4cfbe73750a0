/**
 * Holder classification end to end: real processes (a live child, a zombie, a reparented orphan,
 * a pid that no longer exists) are put into a simulator scenario's process lists, read back
 * through the real addon, and classified by inspectHolders and by a timed-out wait.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { openNvml } from '../../src/nvml/session';
import { inspectHolders } from '../../src/gate/stale';
import { waitForGpusFree } from '../../src/gate/wait';
import { GpuWaitTimeoutError } from '../../src/gate/wait-timeout-error';
import { freshSimulator, GiB, useScenario } from '../helpers/session-helpers';
import { goneProcessPid, killSpawned, spawnOrphan, spawnSleeper, spawnZombie } from '../helpers/processes';

afterEach(async () => {
  await killSpawned();
});

function gpu(index: number, processes: Array<{ pid: number; usedBytes: number; name: string }>): Record<string, unknown> {
  const used = processes.reduce((sum, p) => sum + p.usedBytes, 0) + 3 * GiB;
  return {
    name: 'NVIDIA RTX PRO 6000 Blackwell Server Edition',
    uuid: `GPU-${String(index).padStart(8, '0')}-aaaa-bbbb-cccc-dddddddddddd`,
    pciBusId: `00000000:${(0x18 + index * 0x10).toString(16).toUpperCase()}:00.0`,
    minorNumber: index,
    computeCapability: [12, 0],
    memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: used },
    persistenceMode: true,
    computeMode: 'default',
    migMode: false,
    processes: processes.map((p) => ({ ...p, kinds: ['compute'] })),
  };
}

describe('holders listed by the simulator', () => {
  it('classifies real processes read through the addon: active, zombie, orphan, gone', async () => {
    const live = await spawnSleeper('VLLM::EngineCore');
    const zombie = await spawnZombie();
    const orphan = await spawnOrphan('VLLM::Worker_TP6');
    const gone = await goneProcessPid();
    useScenario({
      devices: [
        gpu(0, [
          { pid: live, usedBytes: 10 * GiB, name: 'VLLM::EngineCore' },
          { pid: zombie.zombiePid, usedBytes: 10 * GiB, name: 'python3' },
        ]),
        gpu(1, [
          { pid: orphan.pid, usedBytes: 20 * GiB, name: 'VLLM::Worker_TP6' },
          { pid: gone, usedBytes: 20 * GiB, name: 'VLLM::Worker_TP7' },
        ]),
      ],
    });
    const session = await openNvml({ libraryPath: freshSimulator() });
    try {
      const snapshot = await session.snapshot({ processes: true });
      const report = await inspectHolders(snapshot, { unitCgroup: null, reaperPids: [orphan.reaperPid], shmPatterns: [] });
      const classes = Object.fromEntries(report.holders.map((h) => [h.pid, h.class]));
      expect(classes).toEqual({ [live]: 'active', [zombie.zombiePid]: 'zombie', [orphan.pid]: 'orphan', [gone]: 'gone' });
      const activeHolder = report.holders.find((h) => h.pid === live)!;
      expect(activeHolder).toMatchObject({ gpus: [0], usedBytes: 10 * GiB, ppid: process.pid });
      expect(activeHolder.cmdline).toMatch(/^VLLM::EngineCore/);
      expect(report.perGpu.map((g) => [g.index, g.unattributedBytes])).toEqual([
        [0, 3 * GiB],
        [1, 3 * GiB],
      ]);
    } finally {
      await session.close();
    }
  });

  it('a timed-out wait names each GPU\'s classified holders', async () => {
    const live = await spawnSleeper('VLLM::Worker_TP0');
    const gone = await goneProcessPid();
    useScenario({ devices: [gpu(0, [{ pid: live, usedBytes: 40 * GiB, name: 'VLLM::Worker_TP0' }]), gpu(1, [{ pid: gone, usedBytes: 40 * GiB, name: 'x' }])] });
    const error = await waitForGpusFree({
      libraryPath: freshSimulator(),
      noProcesses: true,
      stableMs: 0,
      intervalMs: 50,
      timeoutMs: 600,
      env: {},
      inspectHolders: { unitCgroup: null },
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(GpuWaitTimeoutError);
    const timeout = error as GpuWaitTimeoutError;
    const [gpu0, gpu1] = timeout.evaluation!.devices;
    // noProcesses is a criterion, so the 1 GiB maxUsed default does not apply.
    expect(gpu0!.reasons).toEqual(['processes']);
    expect(gpu0!.maxUsedBytes).toBeNull();
    expect(gpu0!.holders.map((h) => [h.pid, h.class])).toEqual([[live, 'active']]);
    expect(gpu1!.holders.map((h) => [h.pid, h.class])).toEqual([[gone, 'gone']]);
    // One wording of a failing GPU (failure-text.ts): a holder is named by its process title, as the log names it.
    expect(timeout.message).toContain(`${live}/VLLM::Worker_TP0/active`);
    expect(timeout.message).toContain(`${gone}/?/gone`);
  });
});
