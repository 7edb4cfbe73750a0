/**
 * Kill safety with real processes: only proven leftovers of this service are signalled; foreign
 * holders, gpugate itself, its ancestors, PID 1 and draining tasks survive; a dry run signals
 * nothing; a leftover that ignores SIGTERM is SIGKILLed after the grace.
 *
 * 1. Library: the simulator lists real pids as GPU holders; the snapshot comes through the real
 *    addon; inspectHolders and reapStale run against a prepared /proc that mirrors those pids
 *    and places some of them in the caller's service cgroup.
 * 2. Command: where this machine lets a test create a cgroup in systemd's named v1 hierarchy (as
 *    root), `gpugate check --kill-stale` runs inside a real `.service` cgroup next to real
 *    leftovers, with its real parent in the same cgroup, and reads the real /proc.
 * 3. Pid reuse: inside a real PID namespace, a leftover exits during the grace and its pid is
 *    handed (ns_last_pid) to an unrelated newcomer, which must never receive the SIGKILL — held
 *    by a pidfd, and on the fall-back path that re-reads the identity before each signal.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { reapStale, type ReapAction } from '../../src/gate/reap';
import { openNvml } from '../../src/nvml/session';
import { inspectHolders } from '../../src/gate/stale';
import { cliEnv, cliPath, parseJsonOutput, type CliRun } from '../helpers/cli';
import { editStat, ProcRoot } from '../helpers/proc-root';
import { deviceStandIn } from '../helpers/cgroups';
import { isAlive, killSpawned, spawnSleeper, until } from '../helpers/processes';
import { repoRoot, simDevice, writeScenario } from '../helpers/sim';
import { freshSimulator } from '../helpers/session-helpers';

const GiB = 1024 ** 3;
const MiB = 2 ** 20;
const UNIT = '/system.slice/vllm.service';
const children: ChildProcess[] = [];
const cleanups: Array<() => void> = [];

afterEach(async () => {
  for (const child of children.splice(0)) if (child.pid !== undefined && isAlive(child.pid)) child.kill('SIGKILL');
  await killSpawned();
  for (const cleanup of cleanups.splice(0).reverse()) cleanup();
});

/** A live process that ignores SIGTERM (bash with an empty TERM trap, looping on sleep). */
async function spawnStubborn(prefix = ''): Promise<number> {
  const child = spawn('bash', ['-c', `${prefix}trap "" TERM; echo ready; while :; do sleep 0.05; done`], { stdio: ['ignore', 'pipe', 'ignore'] });
  children.push(child);
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', () => reject(new Error('the stubborn process exited early')));
  });
  return child.pid!;
}

/** GPU 0 lists `pids` as holders (small, so the GPU itself counts as free). */
function holdersScenario(pids: number[]): Record<string, unknown> {
  return {
    devices: [
      simDevice(0, {
        memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: pids.length * 10 * MiB },
        processes: pids.map((pid) => ({ pid, usedBytes: 10 * MiB, kinds: ['compute'] })),
      }),
    ],
  };
}

function actionOf(actions: ReapAction[], pid: number): ReapAction | undefined {
  return actions.find((action) => action.pid === pid);
}

describe('reapStale on a real snapshot of real processes', () => {
  async function setUp() {
    const leftover = await spawnSleeper('VLLM::Worker_TP0');
    const stubborn = await spawnStubborn();
    const foreign = await spawnSleeper('VLLM::Worker_TP1');
    const draining = await spawnSleeper('VLLM::EngineCore');
    const parent = process.ppid;
    const root = new ProcRoot();
    cleanups.push(() => root.remove());
    const inUnit = `0::${UNIT}\n`;
    // systemd gives each activation its own INVOCATION_ID: the caller's is not the leftovers'.
    const thisActivation = 'INVOCATION_ID=0123456789abcdef0123456789abcdef\0';
    const earlier = 'INVOCATION_ID=fedcba9876543210fedcba9876543210\0';
    root.add({ pid: process.pid, copyFrom: process.pid, cgroup: inUnit, status: `Name:\tnode\nNSpid:\t${process.pid}\n`, environ: thisActivation });
    root.add({ pid: parent, copyFrom: parent, cgroup: inUnit, environ: thisActivation });
    root.add({ pid: 1, copyFrom: 1, cgroup: inUnit });
    root.add({ pid: leftover, copyFrom: leftover, cgroup: inUnit, fds: { '4': '/dev/nvidia0' }, environ: earlier });
    root.add({ pid: stubborn, copyFrom: stubborn, cgroup: inUnit, fds: { '4': '/dev/nvidia0' }, environ: earlier });
    root.add({ pid: foreign, copyFrom: foreign, cgroup: '0::/system.slice/other.service\n', fds: { '4': '/dev/nvidia0' } });
    root.add({ pid: draining, stat: editStat(readFileSync(`/proc/${draining}/stat`, 'utf8'), { 3: 'D' }), copyFrom: draining, cgroup: inUnit, fds: { '4': '/dev/nvidia0' }, environ: earlier });
    const pids = { leftover, stubborn, foreign, draining, parent, self: process.pid, init: 1 };
    process.env['GPUGATE_SIM_SCENARIO'] = writeScenario(holdersScenario(Object.values(pids)));
    const session = await openNvml({ libraryPath: freshSimulator() });
    const snapshot = await session.snapshot({ processes: true });
    await session.close();
    expect(snapshot.devices[0]!.processes!.map((p) => p.pid).sort((a, b) => a - b)).toEqual(Object.values(pids).sort((a, b) => a - b));
    const report = await inspectHolders(snapshot, { procRoot: root.root, unitCgroup: UNIT, shmPatterns: [], scanHidden: false });
    return { pids, root, report };
  }

  it('signals only the two leftovers (SIGKILL for the one ignoring SIGTERM); everyone else survives', async () => {
    const { pids, root, report } = await setUp();
    const classOf = (pid: number): string | undefined => report.holders.find((h) => h.pid === pid)?.class;
    expect(classOf(pids.leftover)).toBe('leftover');
    expect(classOf(pids.stubborn)).toBe('leftover');
    expect(classOf(pids.foreign)).toBe('foreign');
    expect(classOf(pids.draining)).toBe('draining');
    expect(classOf(pids.self)).toBe('active');
    expect(classOf(pids.parent)).toBe('active');

    const actions = await reapStale(report, { procRoot: root.root, graceMs: 400 });
    expect(actionOf(actions, pids.leftover)).toMatchObject({ signal: 'SIGTERM', result: 'exited' });
    expect(actionOf(actions, pids.stubborn)).toMatchObject({ signal: 'SIGKILL', result: 'signalled' });
    // The addon loads here as in a gate: each target was held by a pidfd, not re-read by pid.
    expect(actionOf(actions, pids.stubborn)!.reason).toMatch(/held by a pidfd from before the first signal/);
    for (const pid of [pids.foreign, pids.draining, pids.self, pids.parent, pids.init]) {
      expect(actionOf(actions, pid), `pid ${pid}`).toMatchObject({ signal: null });
      expect(['skipped', 'exited']).toContain(actionOf(actions, pid)!.result);
    }
    await until('the leftovers to be gone', () => !isAlive(pids.leftover) && !isAlive(pids.stubborn));
    for (const pid of [pids.foreign, pids.draining, pids.self, pids.parent]) expect(isAlive(pid), `pid ${pid} must survive`).toBe(true);
  });

  it('a dry run signals nothing and names only the leftovers as would-signal', async () => {
    const { pids, root, report } = await setUp();
    const actions = await reapStale(report, { procRoot: root.root, graceMs: 400, dryRun: true });
    const would = actions.filter((a) => a.result === 'would-signal').map((a) => a.pid).sort((a, b) => a - b);
    expect(would).toEqual([pids.leftover, pids.stubborn].sort((a, b) => a - b));
    expect(actions.every((a) => a.result === 'would-signal' || a.signal === null)).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 300));
    for (const pid of Object.values(pids)) if (pid !== 1) expect(isAlive(pid), `pid ${pid} must survive a dry run`).toBe(true);
  });
});

// ---------------------------------------------------------------- the command, in a real cgroup

const NAMED_HIERARCHY = '/sys/fs/cgroup/systemd';

/** Why the command test cannot run here, or null when it can. */
function cgroupUnavailable(): string | null {
  if (process.getuid?.() !== 0) return 'needs root to create a cgroup';
  if (!existsSync(path.join(NAMED_HIERARCHY, 'cgroup.procs'))) return `no systemd named v1 hierarchy at ${NAMED_HIERARCHY}`;
  const self = readFileSync('/proc/self/cgroup', 'utf8');
  // The unified path must be the root, so that gpugate reads the unit from the name=systemd line.
  if (/^0::(?!\/$).+$/m.test(self)) return 'the unified cgroup path is not the root here';
  if (!/^\d+:name=systemd:/m.test(self)) return 'this process is not in the name=systemd hierarchy';
  return null;
}
const unavailable = cgroupUnavailable();

/** Creates a `.service` cgroup in the named hierarchy; removed (once empty) after the test. */
function makeServiceCgroup(): { procs: string; unit: string } {
  const unit = `/system.slice/gpugate-kill-safety-${process.pid}-${Date.now()}.service`;
  const dir = path.join(NAMED_HIERARCHY, unit);
  mkdirSync(dir, { recursive: true });
  cleanups.push(() => {
    for (let attempt = 0; attempt < 50; attempt++) {
      try {
        rmdirSync(dir);
        return;
      } catch {
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
      }
    }
  });
  return { procs: path.join(dir, 'cgroup.procs'), unit };
}

/** The processes of one command-level run. */
interface ServicePids {
  leftover: number;
  stubborn: number;
  foreign: number;
  self: number;
  parent: number;
  init: number;
}

describe.skipIf(unavailable !== null)(`gpugate check --kill-stale inside a real .service cgroup${unavailable === null ? '' : ` (skipped: ${unavailable})`}`, () => {
  /**
   * Starts: two leftovers (one ignoring SIGTERM) and the command's parent shell in the service
   * cgroup, a foreign sleeper outside it; then the command itself (exec'd by an inner shell whose
   * pid it keeps), with a scenario listing all of them plus PID 1 as holders of GPU 0.
   */
  async function runInService(extraArgs: string[]): Promise<{ run: CliRun; pids: ServicePids }> {
    const { procs } = makeServiceCgroup();
    const join = `echo $$ > ${procs}; `;
    // The leftovers hold a /dev/nvidia* descriptor, as real GPU holders do (without one they are in doubt).
    const device = deviceStandIn(cleanups);
    const leftover = await spawnSleeper(undefined, { holding: device }); // moved below, before the scenario is written
    writeFileSync(procs, String(leftover));
    const stubborn = await spawnStubborn(`${join}exec 3<'${device}'; `);
    const foreign = await spawnSleeper();
    // The leftovers belong to an earlier attempt: it ended well before this one began (start
    // times have a 10 ms resolution; a restart comes at least RestartSec=100ms later).
    await new Promise((resolve) => setTimeout(resolve, 50));
    const work = path.dirname(writeScenario({ devices: [] }));
    const go = path.join(work, `go-${Date.now()}`);
    const selfFile = path.join(work, `self-${Date.now()}`);
    const scenario = path.join(work, `kill-safety-${Date.now()}.json`);
    const inner = `echo $$ > ${selfFile}; while [ ! -e ${go} ]; do sleep 0.02; done; exec "${process.execPath}" "${cliPath()}" check --json --kill-stale --kill-grace 500ms ${extraArgs.join(' ')}`;
    const outer = spawn('bash', ['-c', `${join}bash -c '${inner}'`], { env: cliEnv(scenario), stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(outer);
    let stdout = '';
    let stderr = '';
    outer.stdout!.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    outer.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const done = new Promise<number | null>((resolve) => outer.once('close', (code) => resolve(code)));
    await until('the inner shell to start', () => existsSync(selfFile) && readFileSync(selfFile, 'utf8').trim() !== '');
    const self = Number(readFileSync(selfFile, 'utf8').trim());
    const pids: ServicePids = { leftover, stubborn, foreign, self, parent: outer.pid!, init: 1 };
    for (const pid of [leftover, stubborn, outer.pid!]) expect(readFileSync(`/proc/${pid}/cgroup`, 'utf8')).toContain('.service');
    writeFileSync(scenario, JSON.stringify(holdersScenario(Object.values(pids)), null, 2));
    writeFileSync(go, '');
    const started = Date.now();
    const code = await done;
    return { run: { code, signal: null, stdout, stderr, elapsedMs: Date.now() - started }, pids };
  }

  function signalsOf(run: CliRun): ReapAction[] {
    return (parseJsonOutput(run)['actions'] as { signals: ReapAction[] }).signals;
  }

  it('signals the leftovers (SIGKILL after the grace for the stubborn one); itself, its parent, PID 1 and the foreign holder survive', async () => {
    const { run, pids } = await runInService([]);
    expect(run.code, run.stderr).toBe(0);
    const signals = signalsOf(run);
    expect(actionOf(signals, pids.leftover), JSON.stringify(signals)).toMatchObject({ signal: 'SIGTERM', result: 'exited' });
    expect(actionOf(signals, pids.stubborn), JSON.stringify(signals)).toMatchObject({ signal: 'SIGKILL', result: 'signalled' });
    for (const pid of [pids.self, pids.parent, pids.init, pids.foreign]) expect(actionOf(signals, pid), `pid ${pid}`).toMatchObject({ signal: null, result: 'skipped' });
    await until('the leftovers to be gone', () => !isAlive(pids.leftover) && !isAlive(pids.stubborn));
    expect(isAlive(pids.foreign)).toBe(true);
  });

  it('--dry-run signals nothing', async () => {
    const { run, pids } = await runInService(['--dry-run']);
    expect(run.code, run.stderr).toBe(0);
    const signals = signalsOf(run);
    expect(signals.filter((a) => a.result === 'would-signal').map((a) => a.pid).sort((a, b) => a - b), JSON.stringify(signals)).toEqual([pids.leftover, pids.stubborn].sort((a, b) => a - b));
    expect(signals.every((a) => a.result === 'would-signal' || a.result === 'skipped')).toBe(true);
    for (const pid of [pids.leftover, pids.stubborn, pids.foreign]) expect(isAlive(pid), `pid ${pid} must survive a dry run`).toBe(true);
  });
});

// ------------------------------------------------- a pid reused during the grace is never hit

/** Why a PID namespace with a settable ns_last_pid cannot be made here, or null. */
function pidNamespaceUnavailable(): string | null {
  if (process.getuid?.() !== 0) return 'needs root for unshare --pid';
  const probe = spawnSync('unshare', ['--pid', '--fork', '--mount-proc', 'sh', '-c', 'echo 100 > /proc/sys/kernel/ns_last_pid'], { stdio: 'ignore' });
  if (probe.status !== 0) return 'unshare --pid --fork --mount-proc with a writable ns_last_pid is not available';
  return null;
}
const noPidNamespace = pidNamespaceUnavailable();

interface PidReuseResult {
  actions: ReapAction[];
  events: ReapAction[];
  leftover: number;
  newcomer: number | null;
  newcomerAlive: boolean;
  newcomerSaw: string[];
}

describe.skipIf(noPidNamespace !== null)(`a leftover that exits during the grace, its pid taken by a newcomer${noPidNamespace === null ? '' : ` (skipped: ${noPidNamespace})`}`, () => {
  // test/reliability/helpers/pid-reuse.cjs runs reapStale as PID 1 of its own PID namespace.
  function runPidReuse(mode: 'pidfd' | 'verify', env: NodeJS.ProcessEnv = process.env): PidReuseResult {
    const fixture = path.join(__dirname, 'helpers', 'pid-reuse.cjs');
    const run = spawnSync('unshare', ['--pid', '--fork', '--mount-proc', process.execPath, fixture, path.join(repoRoot(), 'dist'), mode], { encoding: 'utf8', timeout: 30_000, env });
    if (run.status !== 0) throw new Error(`the pid-reuse fixture failed (${String(run.status)}): ${run.stderr}`);
    return JSON.parse(run.stdout.trim()) as PidReuseResult;
  }

  it.each([
    ['held by a pidfd', 'pidfd', {}, /held by a pidfd/],
    ['without pidfds (pidfd: false): identity re-read before each signal', 'verify', {}, /no pidfd .*re-verified before each signal/],
    ['without pidfds (GPUGATE_NO_PIDFD=1)', 'pidfd', { GPUGATE_NO_PIDFD: '1' }, /no pidfd .*re-verified before each signal/],
  ] as const)('%s: the newcomer never receives the SIGKILL', (_name, mode, extra, path) => {
    const result = runPidReuse(mode, { ...process.env, ...extra });
    // The SIGTERM was recorded the moment it was sent, saying how the target was held.
    expect(result.events[0]).toMatchObject({ signal: 'SIGTERM', sent: ['SIGTERM'], result: 'signalled', reason: expect.stringMatching(path) });
    // The set-up really reused the pid inside the grace.
    expect(result.newcomer).toBe(result.leftover);
    expect(result.actions).toEqual([{ pid: result.leftover, signal: 'SIGTERM', sent: ['SIGTERM'], result: 'exited', reason: 'exited after SIGTERM' }]);
    expect(result.newcomerSaw).toEqual([]);
    expect(result.newcomerAlive).toBe(true);
  });
});
