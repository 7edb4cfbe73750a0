/**
 * The fault-injection matrix (test/helpers/fault-table.ts): every NVML function gpugate calls × every
 * plausible return code, injected through the simulator into the real addon (real dlopen, real
 * worker thread). For each row: nothing crashes, the error or the null lands on the right device
 * and field and nowhere else, and a representative subset runs the real `gpugate check` as a
 * subprocess for the exit code of the contract.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openNvml } from '../../src/nvml/session';
import { waitForGpusFree } from '../../src/gate/wait';
import type { FieldError, GpuDevice, NvmlMemoryReader, Snapshot } from '../../src/types';
import {
  expectedOutcome,
  FAULT_CODE_NAMES,
  FAULT_CODES,
  FAULT_TABLE,
  MEMORY_V1_PREREQUISITE,
  type FaultExpectation,
  type FaultRow,
} from '../helpers/fault-table';
import { cliEnv, runCli } from '../helpers/cli';
import { writeScenario } from '../helpers/sim';
import { freshSimulator } from '../helpers/session-helpers';
import { matrixScenario, MATRIX_DEVICE_COUNT, TARGET_DEVICE, type SimFault } from './helpers/fault-scenario';

const DEVICE_SCOPED = new Set(['handle', 'identity', 'memory', 'memory-v1', 'field', 'process-list', 'process-list-extra', 'mig-count', 'mig-handle', 'mig-instance-id', 'health']);
const MIG_STAGES = new Set(['mig-count', 'mig-handle', 'mig-instance-id']);
// An identity field NVML could not report is null (never an empty string).
const IDENTITY_UNREAD: Record<string, unknown> = { name: null, uuid: null, pciBusId: null, minorNumber: null, computeCapability: null };

let library: string;
let variants: Record<string, string | null>;

beforeAll(async () => {
  library = freshSimulator();
  process.env['GPUGATE_SIM_SCENARIO'] = writeScenario(matrixScenario([]));
  const session = await openNvml({ libraryPath: library });
  variants = session.library.variants;
  await session.close();
});

const injectable = FAULT_TABLE.filter((row) => row.stage !== 'not-injectable');
const matrixSize = injectable.length * FAULT_CODES.length;

afterAll(() => {
  const skipped = FAULT_TABLE.filter((row) => row.stage === 'not-injectable').map((row) => `${row.logical} (${row.why ?? ''})`);
  console.log(
    `fault matrix: ${injectable.length} NVML functions x ${FAULT_CODES.length} return codes = ${matrixSize} rows through the addon; ` +
      `${cliRows.length} rows through the gpugate subprocess; not injectable: ${skipped.join(', ')}`,
  );
});

function symbolOf(logical: string): string {
  const symbol = variants[logical];
  if (typeof symbol !== 'string') throw new Error(`the addon bound no symbol for '${logical}'`);
  return symbol;
}

/** The faults (and scenario shape) that inject `code` into `row`'s function. */
function faultsFor(row: FaultRow, code: number): { faults: SimFault[]; mig: boolean } {
  const faults: SimFault[] = [];
  const device = DEVICE_SCOPED.has(row.stage) ? { device: TARGET_DEVICE } : {};
  if (row.stage === 'memory-v1') {
    faults.push({ function: symbolOf(MEMORY_V1_PREREQUISITE.logical), ...device, return: MEMORY_V1_PREREQUISITE.code });
  }
  faults.push({ function: symbolOf(row.logical), ...device, return: code });
  return { faults, mig: MIG_STAGES.has(row.stage) };
}

function checkFieldError(error: FieldError | null | undefined, code: number, symbol: string, where: string): string[] {
  if (error === null || error === undefined) return [`${where}: expected an error ${FAULT_CODE_NAMES[code]} from ${symbol}, got none`];
  const problems: string[] = [];
  if (error.code !== FAULT_CODE_NAMES[code]) problems.push(`${where}: code ${error.code}, expected ${FAULT_CODE_NAMES[code]}`);
  if (error.nvmlReturn !== code) problems.push(`${where}: nvmlReturn ${error.nvmlReturn}, expected ${code}`);
  if (error.fn !== symbol) problems.push(`${where}: fn ${error.fn}, expected ${symbol}`);
  if (typeof error.message !== 'string' || error.message === '') problems.push(`${where}: empty message`);
  return problems;
}

/** The devices other than the target must be untouched. */
function checkOthersClean(snapshot: Snapshot): string[] {
  const problems: string[] = [];
  for (const device of snapshot.devices) {
    if (device.index === TARGET_DEVICE) continue;
    if (device.error !== null) problems.push(`GPU ${device.index} (not the target) has error ${device.error.code}`);
    if (Object.keys(device.fieldErrors).length > 0) problems.push(`GPU ${device.index} (not the target) has fieldErrors ${Object.keys(device.fieldErrors).join(',')}`);
    if (device.memory === null) problems.push(`GPU ${device.index} (not the target) lost its memory reading`);
  }
  return problems;
}

function target(snapshot: Snapshot): GpuDevice {
  const device = snapshot.devices.find((d) => d.index === TARGET_DEVICE);
  if (device === undefined) throw new Error('the snapshot lacks the target GPU');
  return device;
}

/**
 * The target's field errors the fault may account for: a GPU in MIG mode has no whole-GPU
 * utilisation, so the driver answers that query NOT_SUPPORTED whatever the fault (MIG rows).
 */
function faultFieldErrors(device: GpuDevice): GpuDevice['fieldErrors'] {
  const { utilization, ...rest } = device.fieldErrors;
  return device.migMode === true && utilization?.code === 'NVML_ERROR_NOT_SUPPORTED' ? rest : device.fieldErrors;
}

/** Checks one snapshot of a session opened with the fault; returns the problems found. */
function checkSnapshot(snapshot: Snapshot, row: FaultRow, code: number, expected: FaultExpectation, mode: string): string[] {
  const problems: string[] = [];
  const where = (what: string): string => `${mode}: ${what}`;
  if (snapshot.devices.length !== MATRIX_DEVICE_COUNT) problems.push(where(`${snapshot.devices.length} devices, expected ${MATRIX_DEVICE_COUNT}`));
  const device = target(snapshot);
  const symbol = symbolOf(row.logical);
  const outcome = expected.library;
  switch (outcome.kind) {
    case 'unaffected':
    case 'library-null':
      if (device.error !== null) problems.push(where(`target has error ${device.error.code}`));
      if (Object.keys(faultFieldErrors(device)).length > 0) problems.push(where(`target has fieldErrors ${Object.keys(faultFieldErrors(device)).join(',')}`));
      break;
    case 'device-error':
      problems.push(...checkFieldError(device.error, code, symbol, where('target .error')));
      if (outcome.memoryNull && device.memory !== null) problems.push(where('target memory should be null'));
      if (!outcome.memoryNull && device.memory === null) problems.push(where('target memory (read before the failure) should be kept'));
      break;
    case 'memory-v1':
      if (device.error !== null) problems.push(where(`target has error ${device.error.code}`));
      if (device.fieldErrors['memory'] !== undefined) problems.push(where('target has a memory field error after falling back to v1'));
      if (device.memory?.source !== 'v1') problems.push(where(`target memory source ${device.memory?.source ?? 'null'}, expected v1`));
      if (device.memory !== null && device.memory.reservedBytes !== null) problems.push(where('v1 memory must have reservedBytes null'));
      break;
    case 'field-error': {
      const field = outcome.field;
      if (device.error !== null) problems.push(where(`target has a device error ${device.error.code}; expected only field ${field}`));
      problems.push(...checkFieldError(device.fieldErrors[field], code, symbol, where(`target fieldErrors['${field}']`)));
      const others = Object.keys(faultFieldErrors(device)).filter((key) => key !== field);
      if (others.length > 0) problems.push(where(`unexpected fieldErrors ${others.join(',')}`));
      const value = (device as unknown as Record<string, unknown>)[field];
      if (field in IDENTITY_UNREAD) {
        if (value !== IDENTITY_UNREAD[field]) problems.push(where(`${field} is ${JSON.stringify(value)}, expected ${JSON.stringify(IDENTITY_UNREAD[field])}`));
      } else if (field === 'processes.graphics' || field === 'processes.mps') {
        if (!Array.isArray(device.processes)) problems.push(where('the merged process list must still come back'));
      } else if (field === 'migDevices') {
        if (row.stage === 'mig-handle' ? !(Array.isArray(device.migDevices) && device.migDevices.length === 0) : device.migDevices !== undefined) {
          problems.push(where(`migDevices is ${JSON.stringify(device.migDevices)}`));
        }
      } else if (value !== null) {
        problems.push(where(`${field} is ${JSON.stringify(value)}, expected null`));
      }
      break;
    }
    case 'mig-entry-error': {
      if (device.error !== null) problems.push(where(`target has a device error ${device.error.code}`));
      const migs = device.migDevices ?? [];
      if (migs.length !== 2) problems.push(where(`${migs.length} MIG devices, expected 2`));
      for (const mig of migs) {
        problems.push(...checkFieldError(mig.error, code, symbol, where(`MIG slot ${mig.index} .error`)));
        const value = (mig as unknown as Record<string, unknown>)[outcome.field];
        if (value !== null) problems.push(where(`MIG slot ${mig.index} ${outcome.field} is ${JSON.stringify(value)}, expected null`));
      }
      break;
    }
    case 'open-rejects':
      problems.push(where('open should have failed'));
      break;
  }
  problems.push(...checkOthersClean(snapshot).map(where));
  return problems;
}

/** Runs one row through the real addon; returns the problems (empty when the row passes). */
async function runLibraryRow(row: FaultRow, code: number): Promise<string[]> {
  const expected = expectedOutcome(row, code);
  const { faults, mig } = faultsFor(row, code);
  process.env['GPUGATE_SIM_SCENARIO'] = writeScenario(matrixScenario(faults, { mig }));
  // A failed nvmlShutdown leaves the simulator initialised (its scenario would stick): give
  // those rows a library instance of their own.
  const libraryPath = row.stage === 'shutdown' ? freshSimulator() : library;
  let session: NvmlMemoryReader;
  try {
    session = await openNvml({ libraryPath, callTimeoutMs: 5000 });
  } catch (error) {
    if (expected.library.kind !== 'open-rejects') return [`openNvml rejected unexpectedly: ${String(error)}`];
    const e = error as { name?: unknown; code?: unknown; nvmlReturn?: unknown; fn?: unknown; message?: unknown };
    const problems: string[] = [];
    if (e.name !== 'NvmlError') problems.push(`open rejected with ${String(e.name)}, expected NvmlError`);
    if (e.code !== FAULT_CODE_NAMES[code]) problems.push(`open error code ${String(e.code)}, expected ${FAULT_CODE_NAMES[code]}`);
    if (e.nvmlReturn !== code) problems.push(`open error nvmlReturn ${String(e.nvmlReturn)}, expected ${code}`);
    if (e.fn !== symbolOf(row.logical)) problems.push(`open error fn ${String(e.fn)}, expected ${symbolOf(row.logical)}`);
    if (typeof e.message !== 'string' || !e.message.includes(FAULT_CODE_NAMES[code] ?? '?')) problems.push(`open error message does not name the code: ${String(e.message)}`);
    return problems;
  }
  const problems: string[] = [];
  try {
    if (expected.library.kind === 'open-rejects') problems.push('openNvml resolved, expected a rejection');
    if (expected.library.kind === 'library-null') {
      const value = (session.library as unknown as Record<string, unknown>)[expected.library.field];
      if (value !== null) problems.push(`library.${expected.library.field} is ${JSON.stringify(value)}, expected null`);
    }
    problems.push(...checkSnapshot(await session.snapshot({ processes: true }), row, code, expected, 'snapshot'));
    problems.push(...checkSnapshot(session.snapshotSync({ processes: true }), row, code, expected, 'snapshotSync'));
    if (row.stage === 'memory' || row.stage === 'memory-v1') {
      const cheap = await session.snapshot({ memoryOnly: true });
      problems.push(...checkSnapshot(cheap, row, code, expected, 'memoryOnly'));
      const raw = session.readMemorySync();
      const status = raw[TARGET_DEVICE * 5 + 4];
      const wanted = expected.library.kind === 'memory-v1' ? 0 : code;
      if (status !== wanted) problems.push(`readMemorySync: target status slot ${String(status)}, expected ${wanted}`);
      if (wanted !== 0 && !Number.isNaN(raw[TARGET_DEVICE * 5 + 1])) problems.push('readMemorySync: target freeBytes should be NaN');
    }
    if (row.stage === 'health') problems.push(...await checkHealth(session, row, code));
  } catch (error) {
    problems.push(`threw: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  } finally {
    await session.close();
  }
  return problems;
}

/** What the matrix GPUs (RTX PRO 6000) do not have: these health fields answer NOT_SUPPORTED without any fault. */
const HEALTH_ABSENT = ['retiredPagesPending', 'fabric'];

/** A health query's fault: its field of the target's health errs with the code and symbol, nothing else changes, other GPUs are untouched. */
async function checkHealth(session: NvmlMemoryReader, row: FaultRow, code: number): Promise<string[]> {
  const problems: string[] = [];
  const field = row.field ?? '';
  const symbol = symbolOf(row.logical);
  for (let index = 0; index < MATRIX_DEVICE_COUNT; index++) {
    const health = await session.health(index);
    const target = index === TARGET_DEVICE;
    if (target) problems.push(...checkFieldError(health.fieldErrors[field], code, symbol, `health(${index}).fieldErrors['${field}']`));
    const unexpected = Object.entries(health.fieldErrors)
      .filter(([key, error]) => !(target && key === field) && !(HEALTH_ABSENT.includes(key) && error.code === 'NVML_ERROR_NOT_SUPPORTED'))
      .map(([key, error]) => `${key}=${error.code}`);
    if (unexpected.length > 0) problems.push(`health(${index}) has unexpected fieldErrors ${unexpected.join(', ')}`);
  }
  return problems;
}

describe(`fault matrix through the real addon (${matrixSize} rows)`, () => {
  it('covers every NVML function the addon binds, and only those', () => {
    expect(FAULT_TABLE.map((row) => row.logical).sort()).toEqual(Object.keys(variants).sort());
    for (const row of injectable) expect(typeof variants[row.logical], row.logical).toBe('string');
  });

  it.each(injectable.map((row) => [row.logical, row] as const))('%s: every code lands where the table says, no crash', async (_name, row) => {
    const failures: string[] = [];
    for (const code of FAULT_CODES) {
      const problems = await runLibraryRow(row, code);
      failures.push(...problems.map((problem) => `${row.logical} x ${FAULT_CODE_NAMES[code]}: ${problem}`));
    }
    expect(failures).toEqual([]);
  });
});

// ---------------------------------------------------------------- the CLI subset

interface CliRow {
  row: FaultRow;
  code: number;
  expected: FaultExpectation;
}

/** One row per distinct expected outcome (library outcome, exit code): each kind once. */
const cliRows: CliRow[] = (() => {
  const seen = new Set<string>();
  const rows: CliRow[] = [];
  for (const row of injectable) {
    for (const code of FAULT_CODES) {
      const expected = expectedOutcome(row, code);
      const key = `${expected.library.kind}|${expected.cliExit}`;
      if (seen.has(key)) continue;
      seen.add(key);
      rows.push({ row, code, expected });
    }
  }
  return rows;
})();

async function runCliRow({ row, code, expected }: CliRow): Promise<string[]> {
  const { faults, mig } = faultsFor(row, code);
  const scenario = writeScenario(matrixScenario(faults, { mig }));
  const run = await runCli(['check', '--json', '--nvml-timeout', '5s'], { env: cliEnv(scenario), killAfterMs: 20_000 });
  const label = `gpugate check with ${row.logical} x ${FAULT_CODE_NAMES[code]}`;
  const problems: string[] = [];
  if (run.code !== expected.cliExit) problems.push(`${label}: exit ${String(run.code)} (signal ${String(run.signal)}), expected ${expected.cliExit}; stderr: ${run.stderr.trim()}`);
  if (/internal error|\n\s+at /.test(run.stderr)) problems.push(`${label}: internal error or stack trace on stderr: ${run.stderr}`);
  let result: Record<string, unknown> | null = null;
  try {
    result = JSON.parse(run.stdout.trim()) as Record<string, unknown>;
  } catch {
    problems.push(`${label}: stdout is not one JSON object: ${JSON.stringify(run.stdout)}`);
  }
  if (result !== null && result['exitCode'] !== run.code) problems.push(`${label}: JSON exitCode ${String(result['exitCode'])} differs from the exit status ${String(run.code)}`);
  if (expected.cliExit !== 0 && !`${run.stderr}${run.stdout}`.includes(FAULT_CODE_NAMES[code] ?? '?')) {
    problems.push(`${label}: the output never names ${FAULT_CODE_NAMES[code]}; stderr: ${run.stderr.trim()}`);
  }
  return problems;
}

describe('fault matrix through the gpugate command (one row per kind of outcome)', () => {
  it('exits with the contract code, names the NVML code, never a stack trace', async () => {
    const failures: string[] = [];
    const queue = [...cliRows];
    const worker = async (): Promise<void> => {
      for (let next = queue.shift(); next !== undefined; next = queue.shift()) failures.push(...(await runCliRow(next)));
    };
    await Promise.all([worker(), worker()]);
    expect(failures).toEqual([]);
  }, 120_000);

  it('a failed NVML open never exits 0 (regression: the process used to end silently while closing)', async () => {
    const count = FAULT_TABLE.find((row) => row.stage === 'count');
    if (count === undefined) throw new Error('the table lacks the device count function');
    const runs = Array.from({ length: 10 }, () => runCliRow({ row: count, code: 1, expected: expectedOutcome(count, 1) }));
    expect((await Promise.all(runs)).flat()).toEqual([]);
  }, 60_000);
});

// ---------------------------------------------------------------- faults that start mid-wait

describe('memory faults that start in the middle of a wait (from the same table)', () => {
  it('fatal codes reject the wait with an NvmlError on GPU 1; others keep waiting with GPU 1 marked, GPUs 0 and 2 clean', async () => {
    const row = FAULT_TABLE.find((r) => r.stage === 'memory');
    if (row === undefined) throw new Error('the table lacks the memory row');
    const symbol = symbolOf(row.logical);
    // Calls 0-2 list the devices, 3-5 are the first poll: GPU 1's read fails from the second poll on.
    const sessions: Array<{ code: number; session: NvmlMemoryReader }> = [];
    for (const code of FAULT_CODES) {
      process.env['GPUGATE_SIM_SCENARIO'] = writeScenario(matrixScenario([{ function: symbol, device: TARGET_DEVICE, return: code, fromCall: 6 }]));
      sessions.push({ code, session: await openNvml({ libraryPath: freshSimulator() }) });
    }
    const failures: string[] = [];
    await Promise.all(
      sessions.map(async ({ code, session }) => {
        const expected = expectedOutcome(row, code);
        const label = `${symbol} x ${FAULT_CODE_NAMES[code]} from the second poll`;
        try {
          // A limit below the GPUs' 3 MiB keeps them busy, so the wait polls on into the fault
          // (an idle GPU with nothing left to free would end the wait at its first poll).
          await waitForGpusFree({ session, maxUsed: { bytes: 2 ** 20 }, stableMs: 60_000, intervalMs: 50, timeoutMs: 1500, inspectHolders: false });
          failures.push(`${label}: the wait succeeded`);
        } catch (error) {
          const e = error as { name?: string; code?: string; device?: number | null; evaluation?: { polls: number; devices: Array<{ index: number; reasons: string[]; error: FieldError | null; memory: { source: string } | null }> } | null };
          if (expected.cliExit === 69) {
            if (e.name !== 'NvmlError' || e.code !== FAULT_CODE_NAMES[code] || e.device !== TARGET_DEVICE) {
              failures.push(`${label}: expected NvmlError ${FAULT_CODE_NAMES[code]} on GPU ${TARGET_DEVICE}, got ${String(e.name)} ${String(e.code)} device ${String(e.device)}`);
            }
          } else if (e.name !== 'GpuWaitTimeoutError' || !e.evaluation) {
            failures.push(`${label}: expected the wait to time out with an evaluation, got ${String(e.name)} ${String(e.code)}`);
          } else {
            const target = e.evaluation.devices.find((d) => d.index === TARGET_DEVICE);
            const others = e.evaluation.devices.filter((d) => d.index !== TARGET_DEVICE);
            if (e.evaluation.polls < 2) failures.push(`${label}: only ${e.evaluation.polls} poll(s) in 1.5 s`);
            if (expected.library.kind === 'memory-v1') {
              if (target?.memory?.source !== 'v1' || target.reasons.includes('error')) failures.push(`${label}: GPU 1 should read v1 memory without error, got ${JSON.stringify(target)}`);
            } else if (!target?.reasons.includes('error') || target.error?.code !== FAULT_CODE_NAMES[code]) {
              failures.push(`${label}: GPU 1 should be marked with ${FAULT_CODE_NAMES[code]}, got ${JSON.stringify(target)}`);
            }
            for (const other of others) if (other.reasons.includes('error')) failures.push(`${label}: GPU ${other.index} is marked too`);
          }
        } finally {
          await session.close();
        }
      }),
    );
    expect(failures).toEqual([]);
  }, 60_000);
});
