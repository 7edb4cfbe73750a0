/**
 * Fuzzing scenario files through the real addon: a valid scenario mutated character by
 * character, or with one value replaced by arbitrary JSON. The simulator either accepts it (and
 * the snapshot works) or rejects it, and then openNvml rejects with an NvmlError whose message
 * carries the simulator's FILE:LINE:COL explanation. Text that is not JSON is always rejected.
 * Never a crash, a hang or an exception of another kind in the client.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openNvml } from '../../src/nvml/session';
import { simDevice, writeScenario } from '../helpers/sim';
import { freshSimulator } from '../helpers/session-helpers';
import { describeRuns, fuzzParameters } from './helpers/fuzz-settings';

const TEXT_RUNS = 300;
const VALUE_RUNS = 200;
const GiB = 1024 ** 3;
const printed: string[] = [];
afterAll(() => console.log(`fuzz (scenario files): ${printed.join('; ')}`));

/** A scenario using most of the format: two GPUs, one with MIG, processes, a timeline and a fault. */
function richScenario(): Record<string, unknown> {
  return {
    system: { driverVersion: '580.95.05', nvmlVersion: '13.580.95.05', cudaDriverVersion: 13000 },
    startedAt: 'init',
    devices: [
      simDevice(0, {
        memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: 2 * GiB },
        processes: [{ pid: 4242, usedBytes: 2 * GiB, kinds: ['compute', 'graphics'], name: 'VLLM::Worker_TP0' }],
        computeMode: 'default',
        utilization: { gpu: 10, memory: 5 },
      }),
      simDevice(1, {
        migMode: true,
        migDevices: [{ slot: 0, uuid: 'MIG-11111111-2222-3333-4444-555555555555', gpuInstanceId: 1, computeInstanceId: 0, memory: { totalBytes: 24 * GiB, reservedBytes: 0, usedBytes: 0 }, processes: [] }],
      }),
    ],
    timeline: [{ atMs: 60_000, device: 0, set: { memory: { usedBytes: 0 }, processes: [] } }],
    faults: [{ function: 'nvmlDeviceGetTemperature', device: 0, return: 3 }],
  };
}

const BASE_TEXT = `${JSON.stringify(richScenario(), null, 2)}\n`;
const JSON_CHARS = fc.constantFrom('{', '}', '[', ']', ',', ':', '"', '\\', 'a', '1', '0', '-', '.', 'e', 'E', ' ', '\n', 'n', 't', 'u', '\u00e9', '\u0000');

type Mutation = { op: 'truncate' | 'delete' | 'insert' | 'replace'; at: number; char: string } | { op: 'duplicate'; at: number; length: number };

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ op: fc.constantFrom('truncate', 'delete', 'insert', 'replace') as fc.Arbitrary<'truncate' | 'delete' | 'insert' | 'replace'>, at: fc.nat(BASE_TEXT.length - 1), char: JSON_CHARS }),
  fc.record({ op: fc.constant('duplicate' as const), at: fc.nat(BASE_TEXT.length - 1), length: fc.integer({ min: 1, max: 40 }) }),
);

function mutate(text: string, mutations: Mutation[]): string {
  let out = text;
  for (const m of mutations) {
    const at = Math.min(m.at, out.length);
    if (m.op === 'truncate') out = out.slice(0, at);
    else if (m.op === 'delete') out = out.slice(0, at) + out.slice(at + 1);
    else if (m.op === 'insert') out = out.slice(0, at) + m.char + out.slice(at);
    else if (m.op === 'replace') out = out.slice(0, at) + m.char + out.slice(at + 1);
    else if (m.op === 'duplicate') out = out.slice(0, at) + out.slice(at, at + m.length) + out.slice(at);
  }
  return out;
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

let library: string;
beforeAll(() => {
  library = freshSimulator();
});

/** Opens the scenario in `text`; returns what happened, asserting the invariants of either outcome. */
async function openScenario(text: string): Promise<'accepted' | 'rejected'> {
  const file = writeScenario(text);
  process.env['GPUGATE_SIM_SCENARIO'] = file;
  let session;
  try {
    session = await openNvml({ libraryPath: library, callTimeoutMs: 5000 });
  } catch (error) {
    const e = error as { name?: unknown; code?: unknown; message?: unknown };
    expect(e.name, String(e.message)).toBe('NvmlError');
    expect(e.code, String(e.message)).toBe('NVML_ERROR_UNKNOWN');
    const message = String(e.message);
    const at = new RegExp(`\\(simulator: ${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:(\\d+):(\\d+): (.+)\\)$`).exec(message);
    expect(at, `the message should carry the simulator's FILE:LINE:COL text: ${message}`).not.toBeNull();
    const line = Number(at![1]);
    const lines = text.split('\n').length;
    expect(line).toBeGreaterThanOrEqual(1);
    expect(line).toBeLessThanOrEqual(lines + 1);
    expect(at![3]!.length).toBeGreaterThan(3);
    return 'rejected';
  }
  try {
    const snapshot = await session.snapshot({ processes: true });
    expect(snapshot.devices.length).toBe(session.deviceCount);
  } finally {
    await session.close();
  }
  return 'accepted';
}

describe('malformed scenario files through the addon (property)', () => {
  it('the unmutated scenario is accepted (the property below starts from a valid file)', async () => {
    expect(await openScenario(BASE_TEXT)).toBe('accepted');
  });

  it('character mutations: text that is not JSON is rejected with FILE:LINE:COL; anything accepted snapshots fine', async () => {
    const outcomes = { accepted: 0, rejected: 0 };
    printed.push(describeRuns('character mutations', TEXT_RUNS));
    await fc.assert(
      fc.asyncProperty(fc.array(mutation, { minLength: 1, maxLength: 3 }), async (mutations) => {
        const text = mutate(BASE_TEXT, mutations);
        const outcome = await openScenario(text);
        if (!isJson(text)) expect(outcome, `not JSON, yet accepted:\n${text}`).toBe('rejected');
        outcomes[outcome] += 1;
      }),
      fuzzParameters(TEXT_RUNS),
    );
    printed.push(`character mutations accepted ${outcomes.accepted}, rejected ${outcomes.rejected}`);
    expect(outcomes.rejected).toBeGreaterThan(0);
  }, 120_000);

  it('value replacements: any JSON value at any key is accepted or rejected with FILE:LINE:COL, never a crash', async () => {
    const paths: Array<Array<string | number>> = [
      ['system'], ['system', 'cudaDriverVersion'], ['startedAt'], ['devices'], ['devices', 0], ['devices', 0, 'memory'],
      ['devices', 0, 'memory', 'totalBytes'], ['devices', 0, 'memory', 'usedBytes'], ['devices', 0, 'uuid'], ['devices', 0, 'pciBusId'],
      ['devices', 0, 'minorNumber'], ['devices', 0, 'computeCapability'], ['devices', 0, 'computeMode'], ['devices', 0, 'processes'],
      ['devices', 0, 'processes', 0], ['devices', 0, 'processes', 0, 'pid'], ['devices', 0, 'processes', 0, 'usedBytes'], ['devices', 0, 'processes', 0, 'kinds'],
      ['devices', 0, 'utilization'], ['devices', 1, 'migMode'], ['devices', 1, 'migDevices'], ['devices', 1, 'migDevices', 0, 'slot'],
      ['devices', 1, 'migDevices', 0, 'memory'], ['timeline'], ['timeline', 0, 'atMs'], ['timeline', 0, 'device'], ['timeline', 0, 'set'],
      ['faults', 0, 'function'], ['faults', 0, 'device'], ['faults', 0, 'return'],
    ];
    const outcomes = { accepted: 0, rejected: 0 };
    printed.push(describeRuns('value replacements', VALUE_RUNS));
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...paths), fc.jsonValue({ maxDepth: 3 }), async (keyPath, value) => {
        const scenario = richScenario();
        let parent = scenario as Record<string | number, unknown>;
        for (const key of keyPath.slice(0, -1)) parent = parent[key] as Record<string | number, unknown>;
        parent[keyPath[keyPath.length - 1]!] = value;
        outcomes[await openScenario(`${JSON.stringify(scenario, null, 2)}\n`)] += 1;
      }),
      fuzzParameters(VALUE_RUNS),
    );
    printed.push(`value replacements accepted ${outcomes.accepted}, rejected ${outcomes.rejected}`);
    expect(outcomes.rejected).toBeGreaterThan(0);
  }, 120_000);
});
