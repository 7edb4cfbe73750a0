/**
 * The simulator's shared clock: every process reading one scenario sees the same phase of its
 * timeline at the same wall-clock moment, because the timeline is anchored to an explicit start
 * (GPUGATE_SIM_STARTED_AT, the scenario's "startedAt", else the time the file was written), not
 * to each reader's nvmlInit; the per-reader clock is there only when asked for ("init").
 * Real processes (the independent C client), started at different times.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildNvmlClient, interactiveNvmlClient, runNvmlClient } from './helpers/nvml-client';
import { bundledScenario, simDevice, simEnv, simLibraryPath, writeScenario } from './helpers/sim';

const GiB = 2 ** 30;
/** The shortest gap between two steps of restart-race.json's timeline. */
const MIN_STEP_MS = 600;
let client = '';
let remove = (): void => {};
const children: Array<{ kill: () => boolean }> = [];

beforeAll(async () => {
  ({ client, remove } = await buildNvmlClient());
});
afterAll(() => {
  for (const child of children) child.kill();
  remove();
});

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('the shared clock', () => {
  it('two processes started 2 s apart on restart-race.json report the same phase within one poll', async () => {
    const scenario = bundledScenario('restart-race');
    const anchor = Date.now();
    const start = (startedAt: string) => {
      const reader = interactiveNvmlClient(client, simLibraryPath(), simEnv(scenario, { GPUGATE_SIM_STARTED_AT: startedAt }));
      children.push(reader.child);
      return reader;
    };
    const first = start(String(anchor));
    await first.ready;
    await sleep(2000);
    const second = start(String(anchor));
    const ownClock = start('init'); // the per-reader clock, asked for by name: it starts at its own init
    await Promise.all([second.ready, ownClock.ready]);
    const rounds: Array<{ before: string; second: string; own: string; after: string; tookMs: number }> = [];
    while (Date.now() - anchor < 6500) {
      const askedAt = Date.now();
      const before = await first.ask('state');
      const seen = await second.ask('state');
      const own = await ownClock.ask('state');
      const after = await first.ask('state');
      rounds.push({ before, second: seen, own, after, tookMs: Date.now() - askedAt });
      await sleep(50);
    }
    // The sandwich (first, second, first) can tell a shared clock from two clocks only when at most
    // one step of the timeline (600 ms apart) falls inside it: a round slowed past that (a loaded
    // machine, the sanitizer build) proves nothing either way and is not judged. A "state" line is
    // many NVML calls, one reading per device and field, so one reader's line can itself straddle a
    // step; the sandwich therefore holds reading by reading, each read by all three in turn.
    const judged = rounds.filter((r) => r.tookMs < MIN_STEP_MS);
    expect(judged.length).toBeGreaterThanOrEqual(10);
    const readings = (state: string): string[] => state.replace(/^state /, '').split(/[ /]/);
    for (const r of judged) {
      const [before, seen, after] = [r.before, r.second, r.after].map(readings);
      expect(seen).toHaveLength(before!.length);
      seen!.forEach((value, i) => expect([before![i], after![i]], `${r.second} between ${r.before} and ${r.after}`).toContain(value));
    }
    // The timeline moved while both were reading (the check above could have failed)...
    expect(new Set(rounds.map((r) => r.before)).size).toBeGreaterThanOrEqual(3);
    // ...and a reader on its own clock is behind: it still shows the crashed workers' memory.
    expect(rounds.some((r) => r.own !== r.before && r.own !== r.after)).toBe(true);
    for (const reader of [first, second, ownClock]) reader.child.kill();
  }, 30_000);

  it('"startedAt" in the scenario anchors the timeline: in the past it has played, in the future it has not begun', async () => {
    const timeline = [{ atMs: 1000, device: 0, set: { memory: { usedBytes: 0 } } }];
    const device = simDevice(0, { memory: { totalBytes: 80 * GiB, usedBytes: 9 * GiB } });
    const used = async (startedAt: unknown, env: NodeJS.ProcessEnv = {}): Promise<number> => {
      const file = writeScenario({ startedAt, devices: [device], timeline });
      const result = await runNvmlClient(client, ['--lib', simLibraryPath(), 'dump'], simEnv(file, env));
      expect(result.stderr).toBe('');
      return (JSON.parse(result.stdout) as { devices: Array<{ memory: { usedBytes: number } }> }).devices[0]!.memory.usedBytes;
    };
    expect(await used(new Date(Date.now() - 60_000).toISOString())).toBe(0);
    expect(await used(Date.now() - 60_000)).toBe(0);
    expect(await used(new Date(Date.now() + 600_000).toISOString())).toBe(9 * GiB);
    // The variable overrides the file.
    expect(await used(Date.now() - 60_000, { GPUGATE_SIM_STARTED_AT: String(Date.now() + 600_000) })).toBe(9 * GiB);
    expect(await used('init')).toBe(9 * GiB);
  });

  it('without an anchor the clock starts when the scenario file was written, for every reader', async () => {
    const file = writeScenario({
      devices: [simDevice(0, { memory: { totalBytes: 80 * GiB, usedBytes: 9 * GiB } })],
      timeline: [{ atMs: 1500, device: 0, set: { memory: { usedBytes: 0 } } }],
    });
    const reader = interactiveNvmlClient(client, simLibraryPath(), simEnv(file));
    children.push(reader.child);
    await reader.ready;
    expect(await reader.ask('mem 0')).toContain(`used=${9 * GiB} `);
    await sleep(1700);
    // A reader started now, 1.7 s after the file was written, sees the change already made.
    const late = await runNvmlClient(client, ['--lib', simLibraryPath(), 'dump'], simEnv(file));
    expect((JSON.parse(late.stdout) as { devices: Array<{ memory: { usedBytes: number } }> }).devices[0]!.memory.usedBytes).toBe(0);
    expect(await reader.ask('mem 0')).toContain('used=0 ');
    reader.child.kill();
  });

  it('a malformed GPUGATE_SIM_STARTED_AT or startedAt is a clear error', async () => {
    const file = writeScenario({ devices: [simDevice(0)] });
    const bad = await runNvmlClient(client, ['--lib', simLibraryPath(), 'dump'], simEnv(file, { GPUGATE_SIM_STARTED_AT: 'yesterday' }));
    expect(bad.code).toBe(3);
    expect(bad.stdout.trim()).toBe(
      'init-failed rc=999 lastError=GPUGATE_SIM_STARTED_AT=yesterday: expected Unix milliseconds, an ISO 8601 UTC time like 2026-12-01T09:00:00Z, or init',
    );
    const inFile = writeScenario({ startedAt: '2026-13-01T00:00:00Z', devices: [simDevice(0)] });
    const rejected = await runNvmlClient(client, ['--lib', simLibraryPath(), 'dump'], simEnv(inFile));
    expect(rejected.stdout).toContain(`${inFile}:2:16: expected Unix milliseconds, an ISO 8601 UTC time like "2026-12-01T09:00:00Z", or "init" for "startedAt"`);
  });
});
