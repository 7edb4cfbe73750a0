/**
 * A driver stuck in the kernel, or crashing, for real (issue 24): the simulator's `kernelBlock`
 * fault makes a chosen NVML call write to a file on a frozen ext4 filesystem, so the thread making
 * it sleeps uninterruptibly (state D, deaf to SIGKILL) until the test thaws it; its `crash` fault
 * kills the calling process with a real signal.
 *
 * In process (the session's own NVML thread, the opt-in mode once the helper exists): the thread
 * is seen in D, the timeout rejects but the process cannot end before the thaw, and a crash kills
 * the program. Through the NVML helper (the default session of issue 24): the command exits 69 at
 * its deadline and is gone while the abandoned helper stays in D until the thaw; a Node program
 * gets typed rejections and lives on; a second gate and `doctor` see the stuck helper.
 *
 * Every test thaws, kills what is left of its processes, unmounts and detaches in afterEach,
 * whatever happened; states and exits are awaited as events, with generous bounds.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cliEnv, parseJsonOutput, startCli, type CliProcess, type CliRun } from '../helpers/cli';
import { frozenFsUnavailable, makeFrozenFs, type FrozenFs } from '../helpers/frozen-fs';
import { startNodeScript } from '../helpers/node-script';
import { makePackageCopy } from '../helpers/package-copy';
import { isAlive, procState, signalPending, threadStates, until } from '../helpers/processes';
import { executableOf, killProcessesUsingScenario, nvmlHelpersUsingScenario, processesUsingScenario, shownCommandLine } from '../helpers/scenario-processes';
import { testTempDir, writeScenario } from '../helpers/sim';
import { matrixScenario, TARGET_DEVICE, type SimFault } from '../reliability/helpers/fault-scenario';

const unavailable = frozenFsUnavailable();
const skipped = unavailable === null ? '' : ` (skipped: ${unavailable})`;

/** The NVML deadline the command and the programs are given. */
const DEADLINE_MS = 1000;
/**
 * Start-up (Node, the helper's spawn, NVML's open) plus the exit slack on top of the deadline,
 * generous for a loaded 2-core machine; the 10 s default deadline is far beyond it.
 */
const EXIT_SLACK_MS = 6000;
/** How long a state (D, a pending signal, an exit) may take to appear on a loaded machine. */
const EVENT_BOUND_MS = 20_000;
/** A test may wait for a few such events in a row (the doctor test: a stuck check, then doctor). */
const TEST_BOUND_MS = 120_000;
/**
 * These tests leave an NVML helper stuck in the kernel on purpose, and a gate refuses while a
 * helper of its own package is stuck (GPUGATE_DRIVER_STUCK): the command and the programs run from
 * a copy of the package, so the gates of the test files running beside this one are not stopped.
 */
const copy = makePackageCopy();
const ENTRY = copy.entryLiteral;
const nvmlHelperPath = (): string => copy.helperPath;

/** Where the helper exists, sessions run NVML in it unless asked otherwise; before it, every session was in-process. */
function inProcessOptions(options: Record<string, unknown>): string {
  const inProcess = fs.existsSync(nvmlHelperPath()) ? { nvmlProcess: 'in-process' } : {};
  return JSON.stringify({ ...inProcess, ...options });
}

function expectHelperBuilt(): void {
  expect(fs.existsSync(nvmlHelperPath()), `${nvmlHelperPath()} is not built: these tests need the NVML helper process of issue 24`).toBe(true);
}

interface StuckHost {
  mounted: FrozenFs;
  /** The file the faulty call writes to, on the frozen filesystem. */
  blockFile: string;
  scenario: string;
}

const cleanups: Array<() => Promise<void>> = [];

afterEach(async () => {
  const errors: unknown[] = [];
  for (const cleanup of cleanups.splice(0).reverse()) {
    try {
      await cleanup();
    } catch (error) {
      errors.push(error);
    }
  }
  if (errors.length > 0) throw errors[0];
});

/** Leaves nothing of `scenario`'s processes behind after the test (a stuck host's cleanup does this itself, after its thaw). */
function cleanUpProcesses(scenario: string): void {
  cleanups.push(() => killProcessesUsingScenario(scenario));
}

/**
 * Three GPUs whose call `fn` on GPU 1 (by default the memory read, both versions) writes to a file
 * on a fresh frozen-able filesystem. Cleanup (registered here): thaw, kill the processes left
 * using the scenario, then unmount, detach and remove.
 */
function stuckHost(fn = 'nvmlDeviceGetMemoryInfo*'): StuckHost {
  const mounted = makeFrozenFs();
  const blockFile = path.join(mounted.path, 'nvml-call');
  let scenario = '';
  cleanups.push(async () => {
    try {
      if (mounted.frozen) mounted.thaw();
      if (scenario !== '') await killProcessesUsingScenario(scenario, blockFile);
    } finally {
      mounted.dispose();
    }
  });
  fs.writeFileSync(blockFile, ''); // so that the write, not the file's creation, is what blocks
  const fault: SimFault = { function: fn, device: TARGET_DEVICE, kernelBlock: blockFile };
  scenario = writeScenario(matrixScenario([fault]));
  return { mounted, blockFile, scenario };
}

/**
 * Awaits the command's exit (not its output: a helper holding the pipes open would hold that), then
 * its output; `exitedAfterMs` counts from this call, made right after the start.
 */
async function exitOf(cli: CliProcess): Promise<CliRun & { exitedAfterMs: number }> {
  const started = performance.now();
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => {
    if (cli.child.exitCode !== null || cli.child.signalCode !== null) resolve([cli.child.exitCode, cli.child.signalCode]);
    else cli.child.once('exit', (c, s) => resolve([c, s]));
  });
  const exitedAfterMs = performance.now() - started;
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the command exited (${String(code ?? signal)}) but its output stayed open: a child (the NVML helper?) holds its stdout/stderr`)), EVENT_BOUND_MS);
  });
  try {
    const run = await Promise.race([cli.done, bound]);
    return { ...run, code, signal, exitedAfterMs };
  } finally {
    clearTimeout(timer);
  }
}

/** The one NVML helper left using the scenario, checked to be stuck in the kernel in the faulty call. */
function stuckHelper(host: StuckHost, since: number): number {
  const helpers = nvmlHelpersUsingScenario(host.scenario, host.blockFile, copy.helperPath);
  expect(helpers, `helpers using ${host.scenario}: ${processesUsingScenario(host.scenario, host.blockFile).map((pid) => `${pid} ${executableOf(pid) ?? '?'}`).join(', ')}`).toHaveLength(1);
  const pid = helpers[0]!;
  expect(procState(pid)).toBe('D');
  const shown = shownCommandLine(pid) ?? '';
  const match = /^gpugate-nvml-helper in (nvmlDeviceGetMemoryInfo(?:_v2)?) gpu (\d+) since (\d+)$/.exec(shown);
  expect(match, `cmdline of helper ${pid}: ${JSON.stringify(shown)}`).not.toBeNull();
  expect(Number(match![2])).toBe(TARGET_DEVICE);
  expect(Number(match![3])).toBeGreaterThanOrEqual(since - 1000);
  expect(Number(match![3])).toBeLessThanOrEqual(Date.now());
  return pid;
}

/** Runs `gpugate check --nvml-timeout 1s` on the frozen host: it must exit 69 and leave its helper stuck. */
async function firstStuckCheck(host: StuckHost): Promise<{ run: CliRun; helperPid: number }> {
  const since = Date.now();
  const run = await exitOf(startCli(['check', '--nvml-timeout', `${DEADLINE_MS}ms`], { launch: [process.execPath, copy.cli], env: cliEnv(host.scenario), killAfterMs: EVENT_BOUND_MS + DEADLINE_MS }));
  expect(run.code, run.stderr).toBe(69);
  return { run, helperPid: stuckHelper(host, since) };
}

describe.skipIf(unavailable !== null)(`a call stuck in the kernel, in process (the session's own NVML thread)${skipped}`, { timeout: TEST_BOUND_MS }, () => {
  it('the NVML thread of a Node program sleeps in state D while the filesystem is frozen, and the snapshot completes after the thaw', async () => {
    const host = stuckHost();
    host.mounted.freeze();
    const script =
      `const g = require(${ENTRY});` +
      `g.openNvml(${inProcessOptions({ callTimeoutMs: 600_000 })}).then(async (s) => { const snap = await s.snapshot(); console.log('devices ' + snap.devices.length); await s.close(); });`;
    const program = startNodeScript(script, cliEnv(host.scenario), 120_000);
    await until(`a thread of ${program.pid} to sleep in the kernel (state D)`, () => threadStates(program.pid).includes('D'), EVENT_BOUND_MS);
    expect(program.stdout()).toBe(''); // the snapshot is waiting for that thread
    host.mounted.thaw();
    expect(await program.exited).toEqual({ code: 0, signal: null });
    expect((await program.closed).stdout).toBe('devices 3\n');
    expect(fs.readFileSync(host.blockFile, 'utf8')).toHaveLength(1); // the one faulty read wrote its byte
  });

  it('the deadline rejects with GPUGATE_TIMEOUT, but the program cannot end while its thread is in the kernel (why the helper exists)', async () => {
    const host = stuckHost();
    host.mounted.freeze();
    const script =
      `const g = require(${ENTRY});` +
      `g.openNvml(${inProcessOptions({ callTimeoutMs: DEADLINE_MS })}).then((s) => s.snapshot()).then(() => console.log('resolved'), (e) => console.log('rejected ' + e.code));`;
    const program = startNodeScript(script, cliEnv(host.scenario), 120_000);
    let ended = false;
    void program.exited.then(() => (ended = true));
    await program.printed(/rejected GPUGATE_TIMEOUT\n/);
    // Its JavaScript is done (a thread merely hung in user space would not keep it: test/reliability/hangs.test.ts),
    // yet the thread in the kernel is still there, and with it the process: only the thaw ends it.
    await until(`a thread of ${program.pid} to sleep in the kernel (state D)`, () => threadStates(program.pid).includes('D'), EVENT_BOUND_MS);
    expect(threadStates(program.pid)).toContain('D');
    expect(ended).toBe(false);
    host.mounted.thaw();
    expect(await program.exited).toEqual({ code: 0, signal: null });
    expect(isAlive(program.pid)).toBe(false);
  });
});

describe('a crashing library, in process', { timeout: TEST_BOUND_MS }, () => {
  it.each(['SIGSEGV', 'SIGABRT'] as const)('the crash fault kills a Node program that reads a snapshot in process with %s', async (signal) => {
    const scenario = writeScenario(matrixScenario([{ function: 'nvmlDeviceGetMemoryInfo*', device: TARGET_DEVICE, crash: signal }]));
    cleanUpProcesses(scenario);
    const script = `const g = require(${ENTRY}); g.openNvml(${inProcessOptions({})}).then((s) => s.snapshot()).then(() => console.log('resolved'), (e) => console.log('rejected ' + e.code));`;
    const program = startNodeScript(script, cliEnv(scenario));
    expect(await program.exited).toEqual({ code: null, signal });
    expect((await program.closed).stdout).toBe('');
  });
});

describe.skipIf(unavailable !== null)(`a call stuck in the kernel, through the NVML helper (issue 24)${skipped}`, { timeout: TEST_BOUND_MS }, () => {
  it.each([
    { command: 'check', args: ['check'] },
    { command: 'wait', args: ['wait', '--timeout', '60s', '--stable', '0s', '--interval', '100ms', '--stale', 'ignore'] },
  ])('`gpugate $command --nvml-timeout 1s` exits 69 within the deadline plus the slack and is gone; its helper stays in D until the thaw', async ({ args }) => {
    expectHelperBuilt();
    const host = stuckHost();
    host.mounted.freeze();
    const since = Date.now();
    const cli = startCli([...args, '--nvml-timeout', `${DEADLINE_MS}ms`], { launch: [process.execPath, copy.cli], env: cliEnv(host.scenario), killAfterMs: EVENT_BOUND_MS + DEADLINE_MS });
    const run = await exitOf(cli);
    expect(run.code, run.stderr).toBe(69);
    expect(run.signal).toBeNull();
    expect(run.exitedAfterMs).toBeLessThan(DEADLINE_MS + EXIT_SLACK_MS);
    expect(isAlive(cli.child.pid!)).toBe(false); // reaped by us: exited, not stuck
    const helperPid = stuckHelper(host, since);
    expect(executableOf(helperPid)).toBe(nvmlHelperPath());
    expect(signalPending(helperPid, os.constants.signals.SIGKILL)).toBe(true); // abandoned with SIGKILL, which waits for the kernel
    expect(run.stderr).toMatch(/nvmlDeviceGetMemoryInfo/);
    expect(run.stderr).toMatch(new RegExp(`GPU ${TARGET_DEVICE}\\b`));
    expect(run.stderr).toContain(String(helperPid));
    expect(run.stderr).not.toMatch(/internal error|\n\s+at /);
    host.mounted.thaw();
    await until(`the abandoned helper ${helperPid} to end after the thaw`, () => !isAlive(helperPid), EVENT_BOUND_MS);
  });

  it('a Node program gets a typed GPUGATE_TIMEOUT naming the call, the GPU and the helper, and exits by itself while the helper stays stuck', async () => {
    expectHelperBuilt();
    const host = stuckHost();
    host.mounted.freeze();
    const since = Date.now();
    const script =
      `const g = require(${ENTRY});` +
      `g.openNvml({ callTimeoutMs: ${DEADLINE_MS} }).then((s) => s.snapshot()).then(() => console.log('resolved'), (e) => console.log(JSON.stringify(` +
      `{ typed: e instanceof g.GpugateError, code: e.code, fn: e.fn, device: e.device, helperPid: e.helperPid, message: e.message })));`;
    const program = startNodeScript(script, cliEnv(host.scenario), EVENT_BOUND_MS + DEADLINE_MS);
    expect(await program.exited).toEqual({ code: 0, signal: null });
    const { stdout, stderr } = await program.closed;
    const helperPid = stuckHelper(host, since);
    const rejection = JSON.parse(stdout) as { typed: boolean; code: string; fn: string; device: number; helperPid: number; message: string };
    expect(rejection, stderr).toMatchObject({ typed: true, code: 'GPUGATE_TIMEOUT', device: TARGET_DEVICE, helperPid });
    expect(rejection.fn).toMatch(/^nvmlDeviceGetMemoryInfo/);
    expect(rejection.message).toMatch(/nvmlDeviceGetMemoryInfo/);
    host.mounted.thaw();
    await until(`the abandoned helper ${helperPid} to end after the thaw`, () => !isAlive(helperPid), EVENT_BOUND_MS);
  });

  it('a call its NVML thread waits on without a limit of its own (health): the deadline ends that wait too, the helper still in D', async () => {
    // health() is asked through the session's NVML thread, which waits for the helper's reply
    // until the session's deadline abandons the helper. The helper, in D, is deaf to that SIGKILL
    // and keeps its end of the reply pipe open: the abandon itself must end the wait, or the
    // thread would stay until the thaw.
    expectHelperBuilt();
    const host = stuckHost('nvmlDeviceGetRemappedRows');
    host.mounted.freeze();
    const script = `
      const fs = require('node:fs');
      const g = require(${ENTRY});
      const spawner = () => fs.readdirSync('/proc/self/task').find((tid) => {
        try { return fs.readFileSync('/proc/self/task/' + tid + '/children', 'utf8').trim() !== ''; } catch { return false; }
      });
      (async () => {
        const session = await g.openNvml({ callTimeoutMs: ${DEADLINE_MS} });
        const thread = spawner(); // the NVML thread spawned the helper: the kernel lists its child under it
        const outcome = await session.health(${TARGET_DEVICE}).then(() => 'resolved', (e) => e.code);
        const bound = Date.now() + ${EVENT_BOUND_MS};
        while (fs.existsSync('/proc/self/task/' + thread) && Date.now() < bound) await new Promise((resolve) => setTimeout(resolve, 20));
        console.log(JSON.stringify({ mainThread: String(process.pid), thread, outcome, threadEnded: !fs.existsSync('/proc/self/task/' + thread) }));
      })();`;
    const program = startNodeScript(script, cliEnv(host.scenario), 2 * EVENT_BOUND_MS + DEADLINE_MS);
    expect(await program.exited).toEqual({ code: 0, signal: null });
    const { stdout, stderr } = await program.closed;
    const result = JSON.parse(stdout) as { mainThread: string; thread: string | undefined; outcome: string; threadEnded: boolean };
    expect(result.thread, stderr).toMatch(/^\d+$/);
    expect(result.thread).not.toBe(result.mainThread);
    expect(result.outcome).toBe('GPUGATE_TIMEOUT');
    expect(result.threadEnded).toBe(true);
    // The thread's end did not wait for the thaw: the helper is still in the call, in D.
    const helpers = nvmlHelpersUsingScenario(host.scenario, host.blockFile, copy.helperPath);
    expect(helpers).toHaveLength(1);
    expect(procState(helpers[0]!)).toBe('D');
    expect(shownCommandLine(helpers[0]!)).toMatch(new RegExp(`^gpugate-nvml-helper in nvmlDeviceGetRemappedRows gpu ${TARGET_DEVICE} since \\d+$`));
    host.mounted.thaw();
    await until(`the abandoned helper ${helpers[0]!} to end after the thaw`, () => !isAlive(helpers[0]!), EVENT_BOUND_MS);
  });

  it('a second `gpugate check` started while the first one\'s helper is stuck exits 69 at once, pointing at `gpugate doctor`, and starts no helper of its own', async () => {
    expectHelperBuilt();
    const host = stuckHost();
    host.mounted.freeze();
    const { helperPid } = await firstStuckCheck(host);
    // Its own deadline is a minute away and it is killed after EVENT_BOUND_MS: exiting 69 at all means it did not wait for it.
    const second = await exitOf(startCli(['check', '--nvml-timeout', '60s'], { launch: [process.execPath, copy.cli], env: cliEnv(host.scenario), killAfterMs: EVENT_BOUND_MS }));
    expect(second.signal, second.stderr).toBeNull();
    expect(second.code, second.stderr).toBe(69);
    expect(second.stderr).toMatch(/gpugate doctor/);
    expect(second.stderr).toMatch(/nvmlDeviceGetMemoryInfo/);
    expect(nvmlHelpersUsingScenario(host.scenario, host.blockFile, copy.helperPath)).toEqual([helperPid]);
  });

  it('`gpugate doctor` on the stuck host completes and exits 69, its NVML checks "not responding", the rest of the report there', async () => {
    expectHelperBuilt();
    const host = stuckHost();
    host.mounted.freeze();
    await firstStuckCheck(host);
    const work = fs.mkdtempSync(path.join(testTempDir(), 'doctor-stuck-'));
    cleanups.push(() => Promise.resolve(fs.rmSync(work, { recursive: true, force: true })));
    const devDir = path.join(work, 'dev');
    fs.mkdirSync(devDir);
    for (const name of ['nvidiactl', 'nvidia-uvm', 'nvidia0', 'nvidia1', 'nvidia2']) fs.writeFileSync(path.join(devDir, name), '');
    const emptyLog = path.join(work, 'kernel.log');
    fs.writeFileSync(emptyLog, '');
    const env = cliEnv(host.scenario, { GPUGATE_DEV_DIR: devDir });
    const run = await exitOf(startCli(['doctor', '--json', '--kernel-log', emptyLog, '--nvml-timeout', '2s'], { launch: [process.execPath, copy.cli], env, killAfterMs: 2 * EVENT_BOUND_MS }));
    expect(run.signal, run.stderr).toBeNull();
    expect(run.code, run.stderr).toBe(69);
    const document = parseJsonOutput(run) as { exitCode: number; checks: Array<{ id: string; status: string; summary: string }> };
    expect(document.exitCode).toBe(69);
    const nvmlChecks = document.checks.filter((c) => c.id === 'driver.nvml' || c.id.startsWith('gpu.'));
    expect(nvmlChecks.map((c) => c.id)).toContain('driver.nvml');
    for (const check of nvmlChecks) {
      expect(check, JSON.stringify(check)).toMatchObject({ status: 'fail' });
      expect(check.summary).toMatch(/not responding \(stuck in the kernel for [\d.]+ s in nvmlDeviceGetMemoryInfo/);
    }
    const ids = document.checks.map((c) => c.id);
    for (const id of ['host.device-nodes', 'host.persistenced', 'kernel.xid']) expect(ids).toContain(id);
  });
});

describe('a crashing library, through the NVML helper (issue 24)', { timeout: TEST_BOUND_MS }, () => {
  it('`gpugate check` exits 69 naming the signal, and no process of it is left', async () => {
    expectHelperBuilt();
    const scenario = writeScenario(matrixScenario([{ function: 'nvmlDeviceGetMemoryInfo*', device: TARGET_DEVICE, crash: 'SIGSEGV' }]));
    cleanUpProcesses(scenario);
    const run = await exitOf(startCli(['check', '--nvml-timeout', '10s'], { launch: [process.execPath, copy.cli], env: cliEnv(scenario), killAfterMs: EVENT_BOUND_MS }));
    expect(run.code, run.stderr).toBe(69);
    expect(run.stderr).toMatch(/SIGSEGV/);
    expect(run.stderr).not.toMatch(/internal error|\n\s+at /);
    await until('the crashed helper to be gone', () => processesUsingScenario(scenario).length === 0, EVENT_BOUND_MS);
  });

  it('a Node program gets GPUGATE_NVML_HELPER_CRASHED naming the signal, lives on, and reads a snapshot from a new session', async () => {
    expectHelperBuilt();
    const faulty = matrixScenario([{ function: 'nvmlDeviceGetMemoryInfo*', device: TARGET_DEVICE, crash: 'SIGSEGV' }]);
    const scenario = writeScenario(faulty);
    cleanUpProcesses(scenario);
    // The program repairs the "driver" itself (a new scenario file renamed over the old) between its two sessions.
    const repaired = writeScenario(matrixScenario([]));
    const script =
      `const g = require(${ENTRY}); const fs = require('node:fs');` +
      `(async () => {` +
      `  let first = null;` +
      `  try { first = await g.openNvml({ callTimeoutMs: 10000 }); await first.snapshot(); console.log('resolved'); }` +
      `  catch (e) { console.log(JSON.stringify({ typed: e instanceof g.GpugateError, code: e.code, message: e.message, closed: first === null || first.closed })); }` +
      `  fs.renameSync(${JSON.stringify(repaired)}, process.env.GPUGATE_SIM_SCENARIO);` +
      `  const second = await g.openNvml({ callTimeoutMs: 10000 });` +
      `  const snap = await second.snapshot();` +
      `  console.log('second ' + snap.devices.length + ' ' + snap.devices.filter((d) => d.memory !== null && d.memory !== undefined).length);` +
      `  await second.close();` +
      `})().catch((e) => { console.log('failed ' + (e && e.code) + ' ' + (e && e.message)); process.exitCode = 1; });`;
    const program = startNodeScript(script, cliEnv(scenario), 2 * EVENT_BOUND_MS);
    expect(await program.exited).toEqual({ code: 0, signal: null });
    const { stdout, stderr } = await program.closed;
    const [firstLine, secondLine] = stdout.trim().split('\n');
    const rejection = JSON.parse(firstLine ?? 'null') as { typed: boolean; code: string; message: string; closed: boolean } | null;
    expect(rejection, stderr).toMatchObject({ typed: true, code: 'GPUGATE_NVML_HELPER_CRASHED', closed: true });
    expect(rejection!.message).toMatch(/SIGSEGV/);
    expect(secondLine).toBe('second 3 3');
  });
});
