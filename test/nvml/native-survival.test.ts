/**
 * The native layer never takes the process down. Each case runs in a child process (the real
 * addon, the real simulator through dlopen), so an abort would show as its exit status:
 * - a driver whose process-list size answer is absurd (0xFFFFFFFF, 20 million) costs a bounded
 *   allocation and a `processes` error on that GPU only;
 * - a worker_threads worker whose session missed a deadline (or was torn down mid-call) leaves a
 *   thread that returns later into a finished environment: the process lives on and exits 0.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { cliEnv } from '../helpers/cli';
import { packageEntryLiteral, runNodeScript } from '../helpers/node-script';
import { simDevice, testTempDir, writeScenario } from '../helpers/sim';

const MiB = 2 ** 20;
/** The most entries the addon reads from one process list (native/process_list.h). */
const MAX_PROCESS_ENTRIES = 65536;

interface DeviceSummary {
  index: number;
  usedBytes: number | null;
  error: unknown;
  pids: number[] | null;
  processesError: { code: string; nvmlReturn: number; fn: string; message: string } | null;
}

describe('a process-list size answer far beyond any real list', () => {
  const busy = (pid: number) => ({ memory: { totalBytes: 97887 * MiB, reservedBytes: 471 * MiB, usedBytes: 2048 * MiB }, processes: [{ pid, usedBytes: 2048 * MiB }] });
  const scenario = () =>
    writeScenario({
      devices: [
        simDevice(0, busy(4100)),
        simDevice(1, { ...busy(4101), claimedProcessCount: 0xffffffff }),
        simDevice(2, { ...busy(4102), claimedProcessCount: 20_000_000 }),
        simDevice(3, { ...busy(4103), claimedProcessCount: MAX_PROCESS_ENTRIES }), // at the bound: still read
      ],
    });

  it('is a per-GPU processes error with bounded memory, async and blocking, and the process exits 0', async () => {
    const script = `
      const g = require(${packageEntryLiteral()});
      const summary = (snap) => snap.devices.map((d) => ({
        index: d.index, usedBytes: d.memory && d.memory.usedBytes, error: d.error,
        pids: d.processes === null || d.processes === undefined ? null : d.processes.map((p) => p.pid),
        processesError: d.fieldErrors.processes || null,
      }));
      (async () => {
        const session = await g.openNvml();
        const peakBefore = process.resourceUsage().maxRSS;
        const asyncSnap = await session.snapshot({ processes: true });
        const syncSnap = session.snapshotSync({ processes: true });
        const peakGrowthKiB = process.resourceUsage().maxRSS - peakBefore;
        await session.close();
        console.log(JSON.stringify({ async: summary(asyncSnap), sync: summary(syncSnap), peakGrowthKiB }));
      })().catch((e) => { console.error(e && e.stack || e); process.exit(1); });`;
    const run = await runNodeScript(script, cliEnv(scenario()));
    expect({ code: run.code, signal: run.signal }, run.stderr).toEqual({ code: 0, signal: null });
    const result = JSON.parse(run.stdout) as { async: DeviceSummary[]; sync: DeviceSummary[]; peakGrowthKiB: number };
    for (const devices of [result.async, result.sync]) {
      expect(devices.map((d) => d.usedBytes)).toEqual([2048 * MiB, 2048 * MiB, 2048 * MiB, 2048 * MiB]);
      expect(devices.map((d) => d.error)).toEqual([null, null, null, null]);
      expect(devices[0]).toMatchObject({ pids: [4100], processesError: null });
      expect(devices[3]).toMatchObject({ pids: [4103], processesError: null });
      for (const [position, claimed] of [[1, 4294967295], [2, 20000000]] as const) {
        const device = devices[position]!;
        expect(device.pids).toBeNull();
        expect(device.processesError).toMatchObject({ code: 'NVML_ERROR_INSUFFICIENT_SIZE', nvmlReturn: 7, fn: 'nvmlDeviceGetComputeRunningProcesses_v3' });
        expect(device.processesError?.message).toContain(`room for ${claimed} entries`);
        expect(device.processesError?.message).toContain(`${MAX_PROCESS_ENTRIES}`);
      }
    }
    // A 20-million-entry buffer alone would be about 1 GB; the bound keeps a read to a few MB.
    expect(result.peakGrowthKiB).toBeLessThan(64 * 1024);
  });
});

describe('an abandoned or torn-down session in a worker_threads worker', () => {
  /**
   * The parent starts a worker whose first memory read (GPU 0) takes 1.5 s. The simulator writes
   * its call statistics at the nvmlShutdown that follows that read, so the parent knows when the
   * late thread has come back, waits a little longer, and exits 0 if it is still alive.
   */
  function parentScript(mode: 'deadline-then-end' | 'deadline-then-terminate' | 'terminate-mid-call', stats: string): string {
    const timeoutMs = mode === 'terminate-mid-call' ? 60_000 : 200;
    // A late return is what an in-process NVML thread does; in the helper mode the helper is killed
    // at the deadline and never returns (test/nvml/nvml-helper.test.ts), so the deadline modes run in-process.
    const where = mode === 'terminate-mid-call' ? '' : ", nvmlProcess: 'in-process'";
    return `
      const fs = require('node:fs');
      const { Worker } = require('node:worker_threads');
      const code = \`
        const { parentPort, workerData } = require('node:worker_threads');
        const g = require(workerData.entry);
        g.openNvml({ callTimeoutMs: ${timeoutMs}${where} }).then((session) => {
          parentPort.postMessage('opened');
          return session.snapshot();
        }).then(() => parentPort.postMessage('unexpected answer'), (e) => parentPort.postMessage(e.code));
      \`;
      const worker = new Worker(code, { eval: true, workerData: { entry: ${packageEntryLiteral()} } });
      worker.on('message', (m) => {
        console.log('worker: ' + m);
        if (${JSON.stringify(mode)} === 'deadline-then-terminate' && m === 'GPUGATE_TIMEOUT') worker.terminate();
        if (${JSON.stringify(mode)} === 'terminate-mid-call' && m === 'opened') setTimeout(() => worker.terminate(), 100);
      });
      worker.on('error', (e) => console.log('worker error: ' + e.message));
      worker.on('exit', () => {
        console.log('worker ended');
        const started = Date.now();
        const poll = setInterval(() => {
          if (fs.existsSync(${JSON.stringify(stats)})) {
            clearInterval(poll);
            setTimeout(() => console.log('parent alive after the late return'), 300);
          } else if (Date.now() - started > 20000) {
            clearInterval(poll);
            console.log('the late call never returned');
          }
        }, 20);
      });`;
  }

  it.each(['deadline-then-end', 'deadline-then-terminate', 'terminate-mid-call'] as const)(
    '%s: the late NVML thread never calls into the finished environment; the parent exits 0',
    async (mode) => {
      const scenario = writeScenario({
        devices: [simDevice(0), simDevice(1)],
        faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', device: 0, delayMs: 1500 }],
      });
      const stats = path.join(testTempDir(), `late-return-${mode}.json`);
      fs.rmSync(stats, { force: true });
      const run = await runNodeScript(parentScript(mode, stats), cliEnv(scenario, { GPUGATE_SIM_STATS: stats }));
      expect({ code: run.code, signal: run.signal }, run.stderr).toEqual({ code: 0, signal: null });
      const lines = run.stdout.trim().split('\n');
      expect(lines[0]).toBe('worker: opened');
      if (mode !== 'terminate-mid-call') expect(lines[1]).toBe('worker: GPUGATE_TIMEOUT');
      expect(lines).toContain('worker ended');
      expect(lines.at(-1)).toBe('parent alive after the late return');
      expect(lines).not.toContain('worker: unexpected answer');
      // The late thread still paired the session's nvmlInit with its nvmlShutdown.
      const calls = (JSON.parse(fs.readFileSync(stats, 'utf8')) as { calls: Record<string, number> }).calls;
      expect(calls['nvmlShutdown']).toBe(calls['nvmlInit_v2']);
    },
  );
});
