/**
 * `npm run bench -- --quick` as a user runs it: the real harness, the real C programs compiled
 * with cc, the real addon and CLI against the simulator. Pins that every contender and figure is
 * reported and that the JSON matches the markdown; the speed goals are the benchmark's business,
 * not this test's (it asserts no time).
 */
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../../bench/paths';
import type { BenchReport } from '../../bench/report-types';

const run = promisify(execFile);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpugate-bench-run-'));

afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('npm run bench -- --quick', () => {
  it('prints the table with every contender at every size, the goals, and writes the same figures as JSON', { timeout: 180_000 }, async () => {
    const out = path.join(dir, 'latest.json');
    const { stdout } = await run('npm', ['run', '--silent', 'bench', '--', '--quick', '--out', out], {
      cwd: repoRoot(),
      maxBuffer: 16 << 20,
      timeout: 170_000,
    });
    const report = JSON.parse(fs.readFileSync(out, 'utf8')) as BenchReport;
    expect(report.quick).toBe(true);
    expect(stdout).toContain('# gpugate poll-latency benchmark (--quick)');

    const inProcess = [
      'cFloorMemory',
      'cFloorProcesses',
      'nativeRead',
      'snapshotSyncMemory',
      'snapshotAsyncMemory',
      'snapshotSyncProcesses',
      'snapshotAsyncProcesses',
      'snapshotAsyncFull',
    ];
    for (const devices of [1, 8, 16]) {
      for (const processesPerDevice of [0, 2, 8]) {
        for (const contender of inProcess) {
          const row = report.rows.find((r) => r.contender === contender && r.devices === devices && r.processesPerDevice === processesPerDevice);
          expect(row, `${contender} at ${devices}x${processesPerDevice}`).toBeDefined();
          expect(row!.ns.median).toBeGreaterThan(0);
          expect(row!.ns.p99).toBeGreaterThanOrEqual(row!.ns.median);
        }
      }
      for (const contender of ['subprocessExecFile', 'subprocessShellLoop']) {
        expect(report.rows.some((r) => r.contender === contender && r.devices === devices)).toBe(true);
      }
    }
    for (const label of [
      'C floor, memory',
      'readMemorySync(Float64Array): native read',
      'snapshotSync(), memory only',
      'snapshot(), memory only',
      'snapshot(), memory + processes',
      'snapshot({ processes: true }), all fields',
      'nvidia-smi style: execFile per poll',
      'nvidia-smi style: shell loop per poll',
      '`gpugate check`',
      '`gpugate check --stale ignore` (no /proc scan)',
      "`node -e ''`",
      "## Awaited calls against a thread-pool round trip (`await fs.promises.stat('/')`)",
      'NVML calls of one `gpugate wait` (8 simulated GPUs, simulator call counts)',
    ]) {
      expect(stdout).toContain(label);
    }
    // Ratios against the C floor and against the subprocess poll are in the same table.
    expect(stdout).toContain('| × C floor | subprocess poll ÷ this |');

    // Figures that are facts, not speeds: one NVML initialisation in every measuring process.
    expect(report.initCounts.length).toBeGreaterThanOrEqual(15);
    expect(report.initCounts.map((entry) => entry.inits)).toEqual(report.initCounts.map(() => 1));
    // Identity fields are read once per session, however many snapshots a process takes.
    expect(report.identityReads).toHaveLength(9);
    for (const entry of report.identityReads) {
      expect(entry.perDevice, entry.size).toEqual({ name: 1, uuid: 1, pciBusId: 1, computeCapability: 1 });
    }
    expect(report.eventLoop.asyncPath.snapshots).toBeGreaterThan(0);
    expect(report.eventLoop.asyncPath.snapshotMeanMs).toBeGreaterThanOrEqual(5); // the injected 5 ms call ran
    expect(report.rss.count).toBeGreaterThan(0);
    expect(report.startup?.error).toBeNull();
    // Every awaited contender was timed next to its yardstick, at every size.
    for (const contender of ['threadPoolStat', 'snapshotAsyncMemory']) {
      expect(report.rows.filter((r) => r.contender === contender)).toHaveLength(9);
    }
    expect(report.threadPoolRatios).toHaveLength(27);
    for (const entry of report.threadPoolRatios) expect(entry.ratio, `${entry.contender} at ${entry.size}`).toBeGreaterThan(0);
    // The NVML calls of whole `gpugate wait` processes, counted by the simulator: the idle wait is
    // ready at its first poll, the two unstable waits time out after different numbers of polls,
    // and every further poll reads each GPU's memory at least once.
    const calls = report.nvmlCalls;
    expect(calls?.error).toBeNull();
    expect(calls?.idleWait).toMatchObject({ exitCode: 0, polls: 1 });
    expect(calls!.idleWait!.total).toBe(Object.values(calls!.idleWait!.calls).reduce((a, b) => a + b, 0));
    expect(calls!.idleWait!.calls['nvmlInit_v2']).toBe(1);
    expect(calls?.furtherPoll?.shorter.exitCode).toBe(75);
    expect(calls!.furtherPoll!.longer.polls).toBeGreaterThan(calls!.furtherPoll!.shorter.polls);
    expect(calls!.furtherPoll!.perFunction['nvmlDeviceGetMemoryInfo_v2']).toBeGreaterThanOrEqual(8);
    // Busy GPUs whose memory holds still: the waits time out, and a further poll reads memory only.
    expect(calls?.busyPoll?.shorter.exitCode).toBe(75);
    expect(calls!.busyPoll!.longer.polls).toBeGreaterThan(calls!.busyPoll!.shorter.polls);
    expect(Object.keys(calls!.busyPoll!.perFunction).filter((fn) => !fn.startsWith('nvmlDeviceGetMemoryInfo'))).toEqual([]);
    // NVML in the helper process and in-process, side by side, in three measuring processes: in each,
    // both awaited snapshots timed with their yardstick and both opens timed.
    expect(report.processModel?.runs).toHaveLength(3);
    for (const run of report.processModel!.runs) {
      expect(run.openNs.helper.median).toBeGreaterThan(0);
      expect(run.openNs.inProcess.median).toBeGreaterThan(0);
      for (const contender of ['helperSnapshotAsyncMemory', 'inProcessSnapshotAsyncMemory']) {
        expect(run.threadPoolRatios[contender], contender).toBeGreaterThan(0);
      }
    }
    expect(stdout).toContain('## NVML in the helper process vs in-process (8 GPUs, memory only)');
    expect(report.goals.length).toBe(18);
    for (const goal of report.goals) expect(stdout).toContain(`| ${goal.goal} | ${goal.measured} |`);
  });
});

describe('npm run bench with bad input', () => {
  it('names an unknown argument and what it accepts, and exits non-zero', async () => {
    await expect(run(process.execPath, [path.join(repoRoot(), 'bench', 'main.js'), '--fast'], { cwd: repoRoot() })).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringContaining('unknown argument "--fast" (expected --quick, --realtime or --out FILE)'),
    });
  });

  it('says --out needs a file path', async () => {
    await expect(run(process.execPath, [path.join(repoRoot(), 'bench', 'main.js'), '--out'], { cwd: repoRoot() })).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringContaining('--out needs a file path'),
    });
  });
});
