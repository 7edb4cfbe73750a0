/**
 * `--kill-stale` and `--stale fail` as systemd runs them, with real cgroup directories (systemd's
 * named v1 hierarchy and the unified v2 one), real processes moved in through cgroup.procs, and
 * the real command:
 * - a leftover is a process of an earlier activation: a helper this activation started earlier
 *   (same INVOCATION_ID, or started after the activation began) is never signalled;
 * - under Delegate=yes the command runs in `<unit>/.control` and still knows its unit;
 * - a holder in doubt (no /dev/nvidia* descriptor) is never signalled, and says why;
 * - every skipped action is logged at notice level;
 * - interrupted during the grace, the SIGTERM already sent is in the JSON and the log;
 * - another service's engine (PPID 1, its own unit cgroup) is foreign, and `--stale fail` passes;
 * - a worker named with a real setproctitle call (as vLLM names its workers), whose environment
 *   then shows no INVOCATION_ID, is judged by its start time: a leftover when it started before
 *   this activation, never signalled when it started after a process of this activation.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ReapAction } from '../../src/gate/reap';
import { cgroupUnavailable, deviceStandIn, makeServiceCgroup, type HierarchyName, type TestCgroup } from '../helpers/cgroups';
import { cliEnv, cliPath, parseJsonOutput, type CliRun } from '../helpers/cli';
import { isAlive, killSpawned, procPpid, spawnOrphan, spawnSleeper, until } from '../helpers/processes';
import { simDevice, testTempDir, writeScenario } from '../helpers/sim';

const MiB = 2 ** 20;
const GiB = 1024 ** 3;
const THIS_ACTIVATION = 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa';
const EARLIER_ACTIVATION = 'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb';
const cleanups: Array<() => void> = [];
const children: ChildProcess[] = [];

afterEach(async () => {
  for (const child of children.splice(0)) if (child.pid !== undefined && isAlive(child.pid)) child.kill('SIGKILL');
  await killSpawned();
  for (const cleanup of cleanups.splice(0).reverse()) cleanup();
});

/** The environment systemd would give a process of an activation (or none: no INVOCATION_ID). */
function activationEnv(invocationId: string | null): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { PATH: process.env['PATH'] ?? '/usr/bin:/bin' };
  if (invocationId !== null) env['INVOCATION_ID'] = invocationId;
  return env;
}

/** A sleeper holding the device stand-in, moved into `group`. */
async function holderIn(group: TestCgroup, options: { invocationId: string | null; device: string | null; argv0?: string }): Promise<number> {
  const pid = await spawnSleeper(options.argv0, { env: activationEnv(options.invocationId), ...(options.device !== null ? { holding: options.device } : {}) });
  group.join(pid);
  return pid;
}

/** A process ignoring SIGTERM, holding `device`, in `group`, with an earlier activation's environment. */
async function stubbornIn(group: TestCgroup, device: string): Promise<number> {
  const child = spawn('bash', ['-c', `echo $$ > ${group.procs}; exec 3<'${device}'; trap "" TERM; echo ready; while :; do sleep 0.05; done`], {
    stdio: ['ignore', 'pipe', 'ignore'],
    env: activationEnv(EARLIER_ACTIVATION),
  });
  children.push(child);
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', () => reject(new Error('the stubborn process exited early')));
  });
  return child.pid!;
}

/** Debian's python3, which python3-setproctitle installs for. */
const PYTHON = '/usr/bin/python3';
const TITLED_WORKER = 'import sys, time, setproctitle\nsetproctitle.setproctitle(sys.argv[1])\nprint("ready", flush=True)\ntime.sleep(120)\n';

function setproctitleUnavailable(): string | null {
  const probe = spawnSync(PYTHON, ['-c', 'import setproctitle'], { stdio: 'ignore' });
  return probe.status === 0 ? null : `${PYTHON} cannot import setproctitle (install python3-setproctitle)`;
}

/**
 * A python worker holding `device` that names itself `title` with setproctitle, as vLLM's
 * workers do, moved into `group`. Its environment is written over: /proc/PID/environ no longer
 * shows the INVOCATION_ID it was started with.
 */
async function titledWorkerIn(group: TestCgroup, device: string, invocationId: string, title: string): Promise<number> {
  const child = spawn('bash', ['-c', 'exec 3<"$1"; exec "$2" -c "$3" "$4"', 'bash', device, PYTHON, TITLED_WORKER, title], {
    stdio: ['ignore', 'pipe', 'ignore'],
    env: activationEnv(invocationId),
  });
  children.push(child);
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', () => reject(new Error('the titled worker exited early')));
  });
  const pid = child.pid!;
  group.join(pid);
  expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8')).toMatch(new RegExp(`^${title}`));
  expect(readFileSync(`/proc/${pid}/environ`, 'latin1')).not.toContain('INVOCATION_ID');
  return pid;
}

/** The classification the command logged for `pid` before acting (the JSON shows the holders after). */
function judgedLine(run: CliRun, pid: number): string {
  return run.stderr.split('\n').find((line) => line.includes(`stale gpu=0 pid=${pid} `) || line.includes(`kill-stale pid=${pid} result=skipped`)) ?? '';
}

/** GPU 0 lists `pids` (10 MiB each, so the GPU itself counts as free). */
function writeHolders(file: string, pids: number[]): void {
  writeFileSync(file, JSON.stringify({
    devices: [simDevice(0, { memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: pids.length * 10 * MiB }, processes: pids.map((pid) => ({ pid, usedBytes: 10 * MiB, kinds: ['compute'] })) })],
  }));
}

/** A started command: it joins `group` (if any) first, then waits for `go()` before exec'ing gpugate. */
interface Gate {
  pid: number;
  go(holders: number[]): void;
  stderr(): string;
  done: Promise<CliRun>;
}

/**
 * Starts `gpugate ARGS` the way systemd starts an ExecStartPre= line: its shell moves itself into
 * `group`, then exec's the command, so the command's start time is the shell's.
 */
async function startGate(group: TestCgroup | null, args: string[], invocationId: string | null): Promise<Gate> {
  const work = testTempDir();
  const stamp = `${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2)}`;
  const go = path.join(work, `go-${stamp}`);
  const scenario = path.join(work, `holders-${stamp}.json`);
  const join = group === null ? '' : `echo $$ > ${group.procs}; `;
  const script = `${join}echo started; while [ ! -e ${go} ]; do sleep 0.02; done; exec "${process.execPath}" "${cliPath()}" ${args.join(' ')}`;
  const env = cliEnv(scenario, invocationId === null ? {} : { INVOCATION_ID: invocationId });
  const child = spawn('bash', ['-c', script], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let stdout = '';
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const started = new Promise<void>((resolve) => child.stdout!.setEncoding('utf8').once('data', () => resolve()));
  child.stdout!.on('data', (chunk: string) => (stdout += chunk));
  const begun = Date.now();
  const done = new Promise<CliRun>((resolve) => child.once('close', (code, signal) => resolve({ code, signal, stdout: stdout.replace(/^started\n/, ''), stderr, elapsedMs: Date.now() - begun })));
  await started;
  return {
    pid: child.pid!,
    go(holders) {
      writeHolders(scenario, holders);
      writeFileSync(go, '');
    },
    stderr: () => stderr,
    done,
  };
}

function signalsOf(run: CliRun): ReapAction[] {
  return (parseJsonOutput(run)['actions'] as { signals: ReapAction[] }).signals;
}

function actionOf(actions: ReapAction[], pid: number): ReapAction | undefined {
  return actions.find((action) => action.pid === pid);
}

const namedUnavailable = cgroupUnavailable('named');
const unifiedUnavailable = cgroupUnavailable('unified');

describe.skipIf(namedUnavailable !== null)(`which processes of the unit are leftovers${namedUnavailable === null ? '' : ` (skipped: ${namedUnavailable})`}`, () => {
  it('a helper started earlier by this activation (same INVOCATION_ID) is not signalled; a process of an earlier activation is', async () => {
    const { unit } = makeServiceCgroup('named', 'gpugate-activation', cleanups);
    const device = deviceStandIn(cleanups);
    const leftover = await holderIn(unit, { invocationId: EARLIER_ACTIVATION, device, argv0: 'VLLM::Worker_TP0' });
    // An earlier ExecStartPre= line of this activation left a helper running.
    const helper = await holderIn(unit, { invocationId: THIS_ACTIVATION, device });
    const gate = await startGate(unit, ['check', '--json', '--kill-stale', '--kill-grace', '500ms'], THIS_ACTIVATION);
    gate.go([leftover, helper]);
    const run = await gate.done;
    expect(run.code, run.stderr).toBe(0);
    const signals = signalsOf(run);
    expect(actionOf(signals, leftover)).toMatchObject({ signal: 'SIGTERM', sent: ['SIGTERM'], result: 'exited' });
    expect(actionOf(signals, helper)).toMatchObject({ signal: null, sent: [], result: 'skipped', reason: expect.stringMatching(/class active .*same INVOCATION_ID/) });
    await until('the leftover to be gone', () => !isAlive(leftover));
    expect(isAlive(helper)).toBe(true);
  });

  it('without INVOCATION_ID: a process started before this activation is a leftover; one started after it began is not', async () => {
    const { unit } = makeServiceCgroup('named', 'gpugate-start-time', cleanups);
    const device = deviceStandIn(cleanups);
    const leftover = await holderIn(unit, { invocationId: null, device });
    await new Promise((resolve) => setTimeout(resolve, 50));
    const gate = await startGate(unit, ['check', '--json', '--kill-stale', '--kill-grace', '500ms'], null);
    // Started after the activation's first process (the gate's shell): part of this activation.
    await new Promise((resolve) => setTimeout(resolve, 50));
    const helper = await holderIn(unit, { invocationId: null, device });
    gate.go([leftover, helper]);
    const run = await gate.done;
    expect(run.code, run.stderr).toBe(0);
    const signals = signalsOf(run);
    expect(actionOf(signals, leftover)).toMatchObject({ signal: 'SIGTERM', result: 'exited', reason: 'exited after SIGTERM' });
    expect(actionOf(signals, helper)).toMatchObject({ signal: null, result: 'skipped', reason: expect.stringMatching(/not before this activation/) });
    await until('the leftover to be gone', () => !isAlive(leftover));
    expect(isAlive(helper)).toBe(true);
  });

  it('a leftover with no /dev/nvidia* descriptor is in doubt: never signalled, skipped with the reason', async () => {
    const { unit } = makeServiceCgroup('named', 'gpugate-suspect', cleanups);
    const suspect = await holderIn(unit, { invocationId: EARLIER_ACTIVATION, device: null });
    const gate = await startGate(unit, ['check', '--json', '--kill-stale', '--kill-grace', '500ms'], THIS_ACTIVATION);
    gate.go([suspect]);
    const run = await gate.done;
    expect(run.code, run.stderr).toBe(0);
    expect(actionOf(signalsOf(run), suspect)).toMatchObject({ signal: null, sent: [], result: 'skipped', reason: expect.stringMatching(/class unverifiable .*suspect: no \/dev\/nvidia\* descriptor/) });
    expect(run.stderr).toMatch(new RegExp(`kill-stale pid=${suspect} result=skipped reason=".*suspect`));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(isAlive(suspect)).toBe(true);
  });

  it('outside any service cgroup nothing is signalled, and the log says why at notice level (shown without -v)', async () => {
    const { unit } = makeServiceCgroup('named', 'gpugate-elsewhere', cleanups);
    const device = deviceStandIn(cleanups);
    const other = await holderIn(unit, { invocationId: EARLIER_ACTIVATION, device });
    const gate = await startGate(null, ['check', '--json', '--kill-stale', '--kill-grace', '500ms'], null);
    gate.go([other]);
    const run = await gate.done;
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/kill-stale result=skipped reason="gpugate is not in a systemd service's cgroup \(\/\): no holder can be proven a leftover/);
    expect(run.stderr).toMatch(new RegExp(`kill-stale pid=${other} result=skipped reason="class active`));
    expect(isAlive(other)).toBe(true);
  });

  it('interrupted during the grace: the SIGTERM already sent is in the JSON and the log, and no SIGKILL follows', async () => {
    const { unit } = makeServiceCgroup('named', 'gpugate-interrupted', cleanups);
    const device = deviceStandIn(cleanups);
    const stubborn = await stubbornIn(unit, device);
    const gate = await startGate(unit, ['wait', '--json', '--kill-stale', '--kill-grace', '60s', '--timeout', '120s'], THIS_ACTIVATION);
    gate.go([stubborn]);
    await until('the SIGTERM to be logged', () => new RegExp(`kill-stale pid=${stubborn} signal=SIGTERM result=signalled`).test(gate.stderr()));
    process.kill(gate.pid, 'SIGTERM');
    const run = await gate.done;
    expect(run.code, run.stderr).toBe(143);
    expect(actionOf(signalsOf(run), stubborn)).toMatchObject({ signal: 'SIGTERM', sent: ['SIGTERM'], result: 'signalled' });
    expect(isAlive(stubborn)).toBe(true);
  });
});

describe.each([
  ['named', namedUnavailable],
  ['unified', unifiedUnavailable],
] as Array<[HierarchyName, string | null]>)('Delegate=yes: the command runs in <unit>/.control (%s hierarchy)', (hierarchy, unavailable) => {
  it.skipIf(unavailable !== null)(`recognises its unit and signals the leftover in the unit's cgroup${unavailable === null ? '' : ` (skipped: ${unavailable})`}`, async () => {
    const { unit, subs } = makeServiceCgroup(hierarchy, 'gpugate-delegate', cleanups, ['.control']);
    const device = deviceStandIn(cleanups);
    const leftover = await holderIn(unit, { invocationId: EARLIER_ACTIVATION, device, argv0: 'VLLM::Worker_TP3' });
    const gate = await startGate(subs[0]!, ['check', '--json', '--kill-stale', '--kill-grace', '500ms'], THIS_ACTIVATION);
    expect(readFileSync(`/proc/${gate.pid}/cgroup`, 'utf8')).toContain(`${unit.path}/.control`);
    gate.go([leftover]);
    const run = await gate.done;
    expect(run.code, run.stderr).toBe(0);
    expect(actionOf(signalsOf(run), leftover)).toMatchObject({ signal: 'SIGTERM', result: 'exited', reason: 'exited after SIGTERM' });
    await until('the leftover to be gone', () => !isAlive(leftover));
  });
});

describe.skipIf(namedUnavailable !== null)(`another service's engine${namedUnavailable === null ? '' : ` (skipped: ${namedUnavailable})`}`, () => {
  it('with PPID 1 in its own live unit cgroup is foreign, never orphan: --stale fail passes', async () => {
    const { unit: other } = makeServiceCgroup('named', 'other-llm', cleanups);
    // Started by its service manager: reparented, as every service's main process is.
    const { pid: engine } = await spawnOrphan('vllm serve');
    other.join(engine);
    expect(procPpid(engine)).not.toBeNull();
    const { unit: mine } = makeServiceCgroup('named', 'gpugate-own', cleanups);
    const gate = await startGate(mine, ['check', '--json', '--stale', 'fail'], THIS_ACTIVATION);
    gate.go([engine]);
    const run = await gate.done;
    expect(run.code, run.stderr).toBe(0);
    const holders = (parseJsonOutput(run)['gpus'] as Array<{ holders: Array<{ pid: number; class: string; reason: string }> }>)[0]!.holders;
    expect(holders).toContainEqual(expect.objectContaining({ pid: engine, class: 'foreign', reason: expect.stringMatching(/another service other-llm-.*\.service/) }));
    expect(isAlive(engine)).toBe(true);
  });
});


const titleUnavailable = namedUnavailable ?? setproctitleUnavailable();

describe.skipIf(titleUnavailable !== null)(`workers named with setproctitle${titleUnavailable === null ? '' : ` (skipped: ${titleUnavailable})`}`, () => {
  it('one that started before this activation is a leftover although its environment shows no INVOCATION_ID; one started after the activation began is never signalled', async () => {
    const { unit } = makeServiceCgroup('named', 'gpugate-titled', cleanups);
    const device = deviceStandIn(cleanups);
    const leftover = await titledWorkerIn(unit, device, EARLIER_ACTIVATION, 'VLLM::Worker_TP0');
    const gate = await startGate(unit, ['check', '--json', '--kill-stale', '--kill-grace', '500ms'], THIS_ACTIVATION);
    // Started after the activation's first process (the gate's shell), by this activation.
    const current = await titledWorkerIn(unit, device, THIS_ACTIVATION, 'VLLM::Worker_TP1');
    gate.go([leftover, current]);
    const run = await gate.done;
    expect(run.code, run.stderr).toBe(0);
    expect(judgedLine(run, leftover)).toMatch(/class=leftover .*shows no INVOCATION_ID .*started at .*, before this activation/);
    expect(judgedLine(run, current)).toMatch(/class unverifiable .*shows no INVOCATION_ID .*not before this activation.*cannot be told/);
    const signals = signalsOf(run);
    expect(actionOf(signals, leftover)).toMatchObject({ signal: 'SIGTERM', sent: ['SIGTERM'], result: 'exited' });
    expect(actionOf(signals, current)).toMatchObject({ signal: null, sent: [], result: 'skipped' });
    await until('the leftover to be gone', () => !isAlive(leftover));
    expect(isAlive(current)).toBe(true);
  });

  it("the activation began no later than a process showing gpugate's INVOCATION_ID: a titled worker started after it, before gpugate, is never signalled", async () => {
    const { unit } = makeServiceCgroup('named', 'gpugate-titled-main', cleanups);
    const device = deviceStandIn(cleanups);
    const leftover = await titledWorkerIn(unit, device, EARLIER_ACTIVATION, 'VLLM::Worker_TP0');
    // This activation's main process (its environment intact), then its titled worker, and only
    // then gpugate (as an ExecReload= or ExecStartPost= line would run it).
    const main = await holderIn(unit, { invocationId: THIS_ACTIVATION, device: null });
    const worker = await titledWorkerIn(unit, device, THIS_ACTIVATION, 'VLLM::Worker_TP1');
    const gate = await startGate(unit, ['check', '--json', '--kill-stale', '--kill-grace', '500ms'], THIS_ACTIVATION);
    gate.go([leftover, worker]);
    const run = await gate.done;
    expect(run.code, run.stderr).toBe(0);
    expect(judgedLine(run, leftover)).toMatch(/class=leftover /);
    expect(judgedLine(run, worker)).toMatch(/class unverifiable .*not before this activation/);
    expect(actionOf(signalsOf(run), worker)).toMatchObject({ signal: null, sent: [], result: 'skipped' });
    await until('the leftover to be gone', () => !isAlive(leftover));
    expect(isAlive(worker)).toBe(true);
    expect(isAlive(main)).toBe(true);
  });
});
