/**
 * Concurrency: several `gpugate wait` processes on the same GPUs all finish correctly; many
 * waiters in one process share one poll of one real session; sessions used from two worker
 * threads at once (plus the main thread) read consistent snapshots, and one closing does not
 * disturb the others; one session hammered by overlapping async and blocking reads stays
 * consistent.
 */
import * as path from 'node:path';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { openNvml } from '../../src/nvml/session';
import type { NvmlSession, Snapshot, SnapshotOptions } from '../../src/types';
import { waitForGpusFree } from '../../src/gate/wait';
import { cliEnv, parseJsonOutput, runCli } from '../helpers/cli';
import { repoRoot, simDevice, writeScenario } from '../helpers/sim';
import { freshSimulator } from '../helpers/session-helpers';

const GiB = 1024 ** 3;
const MiB = 2 ** 20;
const READER_CLOCK = { GPUGATE_SIM_STARTED_AT: 'init' };

/**
 * Two GPUs busy (40 GiB) that become idle `freeAtMs` after each reader's NVML init: read with
 * GPUGATE_SIM_STARTED_AT=init (READER_CLOCK), the simulator's timeline starts at each process's own
 * init, so however slowly a loaded machine starts a process, it sees the GPUs busy first.
 */
function drainingHost(freeAtMs: number): string {
  const busy = { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: 40 * GiB };
  return writeScenario({
    devices: [simDevice(0, { memory: busy }), simDevice(1, { memory: busy })],
    timeline: [{ atMs: freeAtMs, device: 'all', set: { memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: 8 * MiB } } }],
  });
}

describe('several gpugate wait processes on the same GPUs', () => {
  it('all see the GPUs busy, then free, and exit 0; one with an impossible deadline exits 75', async () => {
    const scenario = drainingHost(2000);
    const args = ['wait', '--json', '--gpus', '0,1', '--stable', '300ms', '--interval', '100ms', '--stale', 'ignore'];
    const env = cliEnv(scenario, READER_CLOCK);
    const runs = await Promise.all([
      ...Array.from({ length: 4 }, () => runCli([...args, '--timeout', '30s'], { env })),
      runCli([...args, '--timeout', '500ms'], { env }),
    ]);
    for (const run of runs.slice(0, 4)) {
      expect(run.code, run.stderr).toBe(0);
      const result = parseJsonOutput(run);
      expect(result).toMatchObject({ result: 'ready', exitCode: 0 });
      expect(result['polls'] as number).toBeGreaterThan(3); // it saw the busy GPUs before they freed
      const gpus = result['gpus'] as Array<{ index: number; usedBytes?: number }>;
      expect(gpus.map((gpu) => gpu.index)).toEqual([0, 1]);
    }
    const late = runs[4]!;
    expect(late.code, late.stderr).toBe(75);
    expect(parseJsonOutput(late)).toMatchObject({ result: 'timeout', exitCode: 75 });
  }, 60_000);
});

describe('many waiters in one process', () => {
  it('share one poll of one real session: 20 waiters, about one snapshot per interval', async () => {
    process.env['GPUGATE_SIM_SCENARIO'] = drainingHost(1000);
    Object.assign(process.env, READER_CLOCK);
    const session = await openNvml({ libraryPath: freshSimulator() });
    let snapshots = 0;
    const counting: NvmlSession = {
      get library() { return session.library; },
      get closed() { return session.closed; },
      snapshot: (options?: SnapshotOptions): Promise<Snapshot> => {
        snapshots += 1;
        return session.snapshot(options);
      },
      snapshotSync: (options?: SnapshotOptions): Snapshot => session.snapshotSync(options),
      close: () => session.close(),
    };
    try {
      const intervalMs = 50;
      const waiters = Array.from({ length: 20 }, (_, i) =>
        waitForGpusFree({ session: counting, gpus: [String(i % 2)], stableMs: 100, intervalMs, timeoutMs: 20_000, inspectHolders: false }),
      );
      const results = await Promise.all(waiters);
      const maxPolls = Math.max(...results.map((r) => r.polls));
      for (const result of results) expect(result.devices[0]!.memory!.usedBytes).toBe(8 * MiB);
      // One poll serves every waiter: the snapshot count follows the poll count, not 20 x it.
      expect(maxPolls).toBeGreaterThan(3);
      expect(snapshots).toBeLessThanOrEqual(maxPolls + 5);
    } finally {
      await session.close();
      delete process.env['GPUGATE_SIM_STARTED_AT'];
    }
  });
});

/** A host with distinct numbers per GPU, so a mixed-up or torn snapshot shows. */
function distinctHost(): Record<string, unknown> {
  return {
    devices: [0, 1, 2, 3].map((index) =>
      simDevice(index, {
        memory: { totalBytes: 96 * GiB, reservedBytes: 100 * MiB, usedBytes: (index + 1) * GiB },
        processes: [{ pid: 1000 + index, usedBytes: (index + 1) * GiB, kinds: ['compute'] }],
      }),
    ),
  };
}

function fingerprint(snapshot: Snapshot): string {
  return snapshot.devices.map((d) => `${d.index}:${d.uuid}:${d.memory?.usedBytes}:${(d.processes ?? []).map((p) => p.pid).join('+')}`).join('|');
}

const WORKER_CODE = `
  const { parentPort, workerData } = require('node:worker_threads');
  const g = require(workerData.entry);
  (async () => {
    const session = await g.openNvml({ libraryPath: workerData.lib });
    const seen = new Set();
    for (let i = 0; i < workerData.rounds; i++) {
      const snap = i % 2 === 0 ? await session.snapshot({ processes: true }) : session.snapshotSync({ processes: true });
      seen.add(snap.devices.map((d) => d.index + ':' + d.uuid + ':' + (d.memory && d.memory.usedBytes) + ':' + (d.processes || []).map((p) => p.pid).join('+')).join('|'));
    }
    await session.close();
    parentPort.postMessage({ seen: [...seen] });
  })().catch((e) => parentPort.postMessage({ error: String(e && e.stack || e) }));
`;

function runWorker(lib: string, rounds: number): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(WORKER_CODE, { eval: true, workerData: { entry: path.join(repoRoot(), 'dist', 'index.js'), lib, rounds }, env: process.env });
    let message: { seen?: string[]; error?: string } | undefined;
    worker.on('message', (m: typeof message) => (message = m));
    worker.on('error', reject);
    worker.on('exit', (code) => {
      if (message?.seen !== undefined && code === 0) resolve(message.seen);
      else reject(new Error(`worker exit ${code}: ${message?.error ?? 'no message'}`));
    });
  });
}

describe('sessions used from several threads at once', () => {
  it('two worker threads and the main thread read consistent snapshots of one library, and closes do not disturb each other', async () => {
    process.env['GPUGATE_SIM_SCENARIO'] = writeScenario(distinctHost());
    const lib = freshSimulator();
    const main = await openNvml({ libraryPath: lib });
    try {
      const expected = fingerprint(await main.snapshot({ processes: true }));
      expect(expected).toContain('3:GPU-');
      // Worker A closes early (after 20 rounds) while B is still reading: NVML's init is reference counted.
      const [a, b] = await Promise.all([runWorker(lib, 20), runWorker(lib, 120)]);
      expect(a).toEqual([expected]);
      expect(b).toEqual([expected]);
      // Both workers closed their sessions; the main thread's session still works.
      expect(fingerprint(main.snapshotSync({ processes: true }))).toBe(expected);
    } finally {
      await main.close();
    }
  }, 60_000);

  it('one session under overlapping async snapshots, blocking snapshots and raw memory reads stays consistent', async () => {
    process.env['GPUGATE_SIM_SCENARIO'] = writeScenario(distinctHost());
    const session = await openNvml({ libraryPath: freshSimulator() });
    try {
      const expected = fingerprint(await session.snapshot({ processes: true }));
      const out = new Float64Array(session.deviceCount * 5);
      const pending: Array<Promise<Snapshot>> = [];
      for (let i = 0; i < 100; i++) {
        pending.push(session.snapshot({ processes: true }));
        if (i % 10 === 0) expect(fingerprint(session.snapshotSync({ processes: true }))).toBe(expected);
        session.readMemorySync(out);
        for (let d = 0; d < 4; d++) expect(out[d * 5 + 2]).toBe((d + 1) * GiB);
      }
      const fingerprints = new Set((await Promise.all(pending)).map(fingerprint));
      expect([...fingerprints]).toEqual([expected]);
    } finally {
      await session.close();
    }
  });
});
