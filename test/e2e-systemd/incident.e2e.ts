/**
 * End to end under a real systemd: the incident's unit, crashing once with an orphaned worker,
 * guarded in each of the ways users do, with gpugate's shipped contrib files. Needs root and
 * systemd 252+ (booted in its own namespaces, see container.ts); skipped with the reason
 * otherwise. Figures go to build/e2e-systemd/results.json (docs/systemd.md records a run).
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cannotRunReason } from './container';
import { INCIDENT, SCALE, repo, runRow, type Row, type RowResult } from './incident';

const reason = cannotRunReason();
if (reason !== null) console.warn(`e2e-systemd: skipped: ${reason}`);

const GiB = 1024 ** 3;
const results: RowResult[] = [];
let smi = '';
let tools = '';

beforeAll(() => {
  if (reason !== null) return;
  tools = mkdtempSync(join(tmpdir(), 'gpugate-e2e-tools-'));
  smi = join(tools, 'nvidia-smi');
  const cc = spawnSync('cc', ['-O2', '-I', join(repo, 'native'), '-o', smi, join(repo, 'scripts', 'gpu-validate', 'nvidia-smi-standin.c'), '-ldl'], { encoding: 'utf8' });
  if (cc.status !== 0) throw new Error(`cannot build the nvidia-smi stand-in: ${cc.stderr}`);
});

afterAll(() => {
  if (reason !== null) return;
  rmSync(tools, { recursive: true, force: true });
  const dir = join(repo, 'build', 'e2e-systemd');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'results.json'), `${JSON.stringify({ scale: SCALE, incident: INCIDENT, rows: results.map(({ journal: _journal, ...rest }) => rest) }, null, 2)}\n`);
});

async function run(row: Row): Promise<RowResult> {
  const result = await runRow(row, smi);
  results.push(result);
  console.log(`e2e-systemd ${JSON.stringify({ ...result, journal: undefined })}`);
  if (process.env.E2E_JOURNAL === '1') console.log(result.journal);
  return result;
}

/**
 * Why gpugate could not attribute the holders inside the test's systemd, or null when it could. Its
 * PID namespace is not the initial one, and gpugate classes every holder `unverifiable` there (on a
 * real host inside a container NVML's pids are host pids): no leftover can then be proven, so
 * --kill-stale has nothing to signal. The rows that need a kill skip with this reason, or check only
 * what still applies.
 */
function unattributableReason(r: RowResult): string | null {
  if (!r.statuses.some((s) => /\/unverifiable\b/.test(s))) return null;
  const reason = `${r.name}: gpugate classes the holders unverifiable in the namespaced systemd (nested PID namespace); --kill-stale cannot be exercised here`;
  console.warn(`e2e-systemd: ${reason}`);
  return reason;
}

/** The physical floor: orphan + driver hold + drain + load (unscaled seconds). */
const FLOOR_S = (INCIDENT.orphanIgnoreMs + INCIDENT.holdMs + INCIDENT.drainMs + INCIDENT.loadMs) / 1000;
let seedFloorS: number | null = null;
const unrelated = (bytes: number): NonNullable<Row['holders']> => [{ unit: 'other-gpu-user.service', title: 'python3', bytes, gpus: [5, 7] }];
const killStale = '[Service]\nExecStartPre=\nExecStartPre=gpugate wait --min-free 0.9 --margin 2GiB --stable 5s --timeout 240s --notify --kill-stale --kill-grace 10s\n';

describe.skipIf(reason !== null)('the incident under systemd (times scaled 1/' + String(SCALE) + ')', () => {
  it('no guard: vLLM\'s own check fails the restarts on cuda:6 until the memory is back', async () => {
    const r = await run({ name: 'none', guard: 'none' });
    expect(r.crashes).toBe(1);
    expect(r.failedStarts).toBeGreaterThanOrEqual(1);
    expect(r.valueErrors).toBeGreaterThanOrEqual(1);
    expect(r.journal).toMatch(/ValueError: Free memory on device cuda:6/);
  });

  it('the nvidia-smi loop: no failed start, recovery at the physical floor', async () => {
    const r = await run({ name: 'seed loop', guard: 'seed' });
    expect(r.failedStarts).toBe(0);
    expect(r.healthyAfterCrashS).not.toBeNull();
    seedFloorS = r.healthyAfterCrashS;
    expect(seedFloorS!).toBeGreaterThanOrEqual(FLOOR_S * 0.9);
  });

  it('gpugate\'s line alone: no failed start', async () => {
    const r = await run({ name: 'gpugate line', guard: 'line' });
    expect(r.failedStarts).toBe(0);
    expect(r.healthyAfterCrashS).not.toBeNull();
  });

  it('the shipped drop-in: no failed start, healthy close to the floor, status names the busy GPU first and is cleared', async () => {
    const r = await run({ name: 'shipped drop-in', guard: 'dropin' });
    expect(r.failedStarts).toBe(0);
    expect(r.startLimitHits).toBe(0);
    expect(r.healthyAfterCrashS).not.toBeNull();
    expect(r.healthyAfterCrashS!).toBeLessThanOrEqual((seedFloorS ?? FLOOR_S) + 2 * SCALE);
    // After the crash GPU 6 (the orphan's) is the busy one: it leads the line.
    const afterCrash = r.statuses.find((s) => s.includes('88GiB used'));
    expect(afterCrash).toMatch(/^waiting: GPU 6 /);
    expect(r.statuses.join('\n')).not.toMatch(/more\)/);
    expect(r.statuses[r.statuses.length - 1]).toBe('');
  });

  it('the shipped drop-in beside unrelated 1 GiB holders on GPUs 5 and 7', async () => {
    const r = await run({ name: 'shipped drop-in, unrelated 1 GiB holders', guard: 'dropin', holders: unrelated(1 * GiB) });
    expect(r.failedStarts).toBe(0);
    expect(r.healthyAfterCrashS).not.toBeNull();
    expect(r.healthyAfterCrashS!).toBeLessThanOrEqual((seedFloorS ?? FLOOR_S) + 2 * SCALE);
  });

  it('the shipped drop-in with KillMode=process and --kill-stale', async () => {
    const r = await run({ name: 'shipped drop-in, KillMode=process, --kill-stale', guard: 'dropin', service: ['KillMode=process'], override: killStale });
    expect(r.failedStarts).toBe(0);
    expect(r.healthyAfterCrashS).not.toBeNull();
    expect(r.healthyAfterCrashS!).toBeLessThanOrEqual((seedFloorS ?? FLOOR_S) + 2 * SCALE);
    if (unattributableReason(r) === null) {
      expect(r.journal).toMatch(/event=kill-stale .*pid=\d+/);
      expect(r.statuses.some((s) => s.startsWith('stopping leftovers of this unit'))).toBe(true);
    }
  });

  it('the nvidia-smi loop beside unrelated 2 GiB holders never lets the service start', async () => {
    const r = await run({ name: 'seed loop, unrelated 2 GiB holders', guard: 'seed', holders: unrelated(2 * GiB), deadlineMs: 40_000 });
    expect(r.healthyAfterCrashS).toBeNull();
    expect(r.failedStarts).toBeGreaterThanOrEqual(1);
  });

  it('gpugate --stale fail beside another service\'s healthy vLLM engine', async () => {
    const r = await run({
      name: '--stale fail beside another service\'s healthy vLLM',
      guard: 'dropin',
      holders: [{ unit: 'other-llm.service', title: 'VLLM::EngineCore', bytes: 1 * GiB, gpus: [5, 7] }],
      override: '[Service]\nExecStartPre=\nExecStartPre=gpugate wait --min-free 0.9 --margin 2GiB --stable 5s --timeout 240s --notify --stale fail\n',
      deadlineMs: 40_000,
    });
    if (r.statuses.some((s) => /--stale fail: stale resources found: .*orphan/.test(s))) {
      // The other unit's engine (ppid 1, a VLLM:: title) is classed orphan: every start fails.
      expect(r.failedStarts).toBeGreaterThanOrEqual(1);
      console.warn('e2e-systemd: another unit\'s healthy engine is still classed orphan; --stale fail blocks the start');
    } else {
      expect(r.failedStarts).toBe(0);
      expect(r.healthyAfterCrashS).not.toBeNull();
    }
  });

  it('Type=notify, User= and Delegate=yes services recover the same way', async () => {
    const r = await run({ name: 'shipped drop-in, Type=notify, User=nobody, Delegate=yes', guard: 'dropin', service: ['Type=notify', 'Delegate=yes'], user: 'nobody' });
    expect(r.failedStarts).toBe(0);
    expect(r.healthyAfterCrashS).not.toBeNull();
    expect(r.healthyAfterCrashS!).toBeLessThanOrEqual((seedFloorS ?? FLOOR_S) + 2 * SCALE);
    expect(r.statuses[r.statuses.length - 1]).toBe('serving');
  });

  it('a crash during model load', async () => {
    const r = await run({ name: 'shipped drop-in, crash during model load', guard: 'dropin', crashDuringLoad: true });
    expect(r.failedStarts).toBe(0);
    expect(r.healthyAfterCrashS).not.toBeNull();
  });

  it('two crashes in a row', async () => {
    const r = await run({ name: 'shipped drop-in, two crashes in a row', guard: 'dropin', crashes: 2, deadlineMs: 90_000 });
    expect(r.crashes).toBe(2);
    expect(r.failedStarts).toBe(0);
    expect(r.healthyAfterCrashS).not.toBeNull();
  });

  it('the drop-in\'s start limit ends a crash loop', async () => {
    // Crashing during every load: six starts within StartLimitIntervalSec=, then the unit fails.
    const r = await run({ name: 'shipped drop-in, crash loop until the start limit', guard: 'dropin', crashes: 100, crashDuringLoad: true, deadlineMs: 110_000 });
    expect(r.startLimitHits).toBeGreaterThanOrEqual(1);
    expect(r.finalState).toMatch(/^failed\/failed\//);
    // Every one of the six starts got past the wait and crashed on its own: none failed at the gate.
    expect(r.crashes).toBe(6);
    expect(r.failedStarts).toBe(0);
  }, 150_000);

  it('systemctl stop while the drop-in waits ends promptly', async () => {
    const r = await run({ name: 'stop during the wait', guard: 'dropin', stopWhenStatus: /^waiting:/ });
    expect(r.stopS).not.toBeNull();
    // Generous against the 90 s stop timeout: gpugate exits on SIGTERM at once.
    expect(r.stopS!).toBeLessThan(10);
    // systemd counts only exit 0 as a clean end of an ExecStartPre= command, so the interrupted
    // wait (exit 143) leaves the unit failed rather than inactive; it never starts the service.
    expect(r.finalState).toMatch(/^(inactive|failed)\//);
    expect(r.crashes).toBe(1);
    expect(r.journal).toMatch(/event=failed result=interrupted reason="interrupted by SIGTERM/);
  });

  it('systemctl stop during the kill grace ends promptly', async (ctx) => {
    const r = await run({ name: 'stop during the kill grace', guard: 'dropin', service: ['KillMode=process'], override: killStale, stopWhenStatus: /^stopping leftovers/ });
    // Without attributable holders there is no kill grace to stop during: skipped, with the reason.
    const unattributable = unattributableReason(r);
    if (unattributable !== null) ctx.skip(unattributable);
    expect(r.stopS).not.toBeNull();
    expect(r.stopS!).toBeLessThan(10);
  });
});
