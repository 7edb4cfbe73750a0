/**
 * The simulator's shared clock: every process reading one scenario sees the same phase of its
 * timeline at the same wall-clock moment, because the timeline is anchored to an explicit start
 * (GPUGATE_SIM_STARTED_AT, the scenario's "startedAt", else the time the file was written), not
 * to each reader's nvmlInit; the per-reader clock is there only when asked for ("init").
 * Real processes (the independent C client), started at different times.
 */
import * as fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildNvmlClient, interactiveNvmlClient, runNvmlClient } from '../helpers/nvml-client';
import { bundledScenario, simDevice, simEnv, simLibraryPath, writeScenario } from '../helpers/sim';

const GiB = 2 ** 30;
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

/**
 * The per-device readings a "state" line gives (used bytes, compute process count), as
 * restart-race.json's timeline sets them: `valuesDuring(a, b)` lists every state the timeline
 * holds between a and b ms after its anchor (entries apply in file order, as the simulator applies
 * them).
 */
function restartRaceTimeline(file: string): { fields: number; valuesDuring: (fromMs: number, toMs: number) => string[][] } {
  type Device = { memory: { usedBytes: number }; processes: unknown[] };
  type Entry = { atMs: number; device: number | 'all'; set: { memory?: { usedBytes: number }; processes?: unknown[] } };
  const scenario = JSON.parse(fs.readFileSync(file, 'utf8')) as { devices: Device[]; timeline: Entry[] };
  const stateAt = (ms: number): string[] => {
    const devices = scenario.devices.map((d) => ({ used: d.memory.usedBytes, count: d.processes.length }));
    for (const entry of scenario.timeline) {
      if (entry.atMs > ms) continue;
      for (const [index, device] of devices.entries()) {
        if (entry.device !== 'all' && entry.device !== index) continue;
        if (entry.set.memory) device.used = entry.set.memory.usedBytes;
        if (entry.set.processes) device.count = entry.set.processes.length;
      }
    }
    return devices.flatMap((d) => [String(d.used), String(d.count)]);
  };
  return {
    fields: scenario.devices.length * 2,
    valuesDuring: (fromMs, toMs) => [
      stateAt(fromMs),
      ...scenario.timeline.filter((e) => e.atMs > fromMs && e.atMs <= toMs).map((e) => stateAt(e.atMs)),
    ],
  };
}

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
    // Each answer with the window it was asked and answered in, on the timeline's own scale (ms
    // since the anchor). A reader on the shared clock reads, field by field, a value the timeline
    // holds somewhere inside that window; however slow a machine makes the window, a reader on
    // another clock is caught as soon as it shows a value the timeline did not hold then.
    type Answer = { readings: string[]; fromMs: number; toMs: number };
    const answers: Record<'first' | 'second' | 'own', Answer[]> = { first: [], second: [], own: [] };
    const readings = (state: string): string[] => state.replace(/^state /, '').split(/[ /]/);
    const ask = async (name: keyof typeof answers, reader: typeof first): Promise<void> => {
      const fromMs = Date.now() - anchor;
      const state = await reader.ask('state');
      answers[name].push({ readings: readings(state), fromMs, toMs: Date.now() - anchor });
    };
    while (Date.now() - anchor < 6500) {
      await ask('first', first);
      await ask('second', second);
      await ask('own', ownClock);
      await sleep(50);
    }
    const timeline = restartRaceTimeline(scenario);
    // The clocks compared are the test's and the simulator's reading of one wall clock: allow for
    // the millisecond rounding on both sides.
    const heldDuring = (answer: Answer, i: number): string[] => timeline.valuesDuring(answer.fromMs - 2, answer.toMs + 2).map((r) => r[i]!);
    const offClock = (answer: Answer): boolean => answer.readings.some((value, i) => !heldDuring(answer, i).includes(value));
    for (const name of ['first', 'second'] as const) {
      for (const answer of answers[name]) {
        expect(answer.readings).toHaveLength(timeline.fields);
        answer.readings.forEach((value, i) =>
          expect(heldDuring(answer, i), `${name} reader, reading ${i}, asked ${answer.fromMs}..${answer.toMs} ms`).toContain(value),
        );
      }
    }
    // The timeline moved while both were reading (the check above could have failed)...
    expect(new Set(answers.first.map((a) => a.readings.join(' '))).size).toBeGreaterThanOrEqual(3);
    expect(new Set(answers.second.map((a) => a.readings.join(' '))).size).toBeGreaterThanOrEqual(2);
    // ...and a reader on its own clock, started 2 s late, is caught by the same check.
    expect(answers.own.some(offClock)).toBe(true);
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
