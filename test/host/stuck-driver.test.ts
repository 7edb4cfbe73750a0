/**
 * A driver already stuck, with a process really asleep in the kernel: a copy of dash installed as
 * `gpugate-nvml-helper` beside a copy of the package's addon, its command line the helper's
 * ("gpugate-nvml-helper in <fn> gpu <n> since <ms>", set as argv[0]), writing to a frozen ext4
 * loop mount, so it sleeps in state D until the file system is thawed (SIGKILL does not end it).
 * The finder sees it; the policy counts it only when its call is old enough or its session killed
 * it, and only when it runs as root or as us; the CLI (`check`, `status`, `doctor`) and the
 * library's gate(), run from the package copy whose helper it is, refuse before opening NVML;
 * `doctor` reports the NVML checks as not responding and the rest in full. Without a helper, a
 * doctor whose own call hangs names that call, its GPU and its deadline.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { createRequire } from 'node:module';
import { afterEach, beforeAll, afterAll, describe, expect, it } from 'vitest';
import { findStuckNvmlHelpers } from '../../src/host/stuck-nvml-helper';
import { parseStat, parseStatus } from '../../src/host/procfs';
import { findStuckDriver, refuseIfDriverStuck } from '../../src/gate/stuck-driver';
import { nvmlHelperPath } from '../../src/nvml/helper-path';
import { cliEnv, parseJsonOutput, runCli } from '../helpers/cli';
import { until } from '../helpers/processes';
import { repoRoot, simDevice, writeScenario } from '../helpers/sim';

const isRoot = process.getuid?.() === 0;
if (!isRoot) console.warn('stuck-driver: freezing a file system needs root; the real-process tests are skipped');

/** A package copy whose build/Release holds the addon (a link to this build) and the stand-in helper. */
let pkg = '';
let helper = '';
/** The frozen file system: image, loop device, mount point. */
let image = '';
let device = '';
let mountPoint = '';
let frozen = false;

function run(program: string, args: string[]): string {
  return execFileSync(program, args, { encoding: 'utf8' }).trim();
}

beforeAll(() => {
  if (!isRoot) return;
  // World-traversable, so the helper can also be run as another user.
  pkg = fs.mkdtempSync(path.join(tmpdir(), 'gpugate-stuck-'));
  fs.chmodSync(pkg, 0o755);
  fs.copyFileSync(path.join(repoRoot(), 'package.json'), path.join(pkg, 'package.json'));
  fs.cpSync(path.join(repoRoot(), 'dist'), path.join(pkg, 'dist'), { recursive: true });
  fs.symlinkSync(path.join(repoRoot(), 'node_modules'), path.join(pkg, 'node_modules'));
  fs.mkdirSync(path.join(pkg, 'build', 'Release'), { recursive: true, mode: 0o755 });
  fs.symlinkSync(path.join(repoRoot(), 'build', 'Release', 'gpugate.node'), path.join(pkg, 'build', 'Release', 'gpugate.node'));
  helper = path.join(pkg, 'build', 'Release', 'gpugate-nvml-helper');
  fs.copyFileSync('/bin/dash', helper);
  fs.chmodSync(helper, 0o755);
  image = path.join(pkg, 'fs.img');
  mountPoint = path.join(pkg, 'mnt');
  fs.mkdirSync(mountPoint);
  run('truncate', ['-s', '16M', image]);
  run('mkfs.ext4', ['-q', '-F', image]);
  device = run('losetup', ['--find', '--show', image]);
  run('mount', [device, mountPoint]);
  fs.chmodSync(mountPoint, 0o777);
  run('fsfreeze', ['-f', mountPoint]);
  frozen = true;
});

const children: ChildProcess[] = [];
/** Stand-in helpers started so far: each writes a file of its own. */
let started = 0;

/** Ends every stand-in helper: SIGKILL is only pending while one sleeps in D, so thaw, then await each exit. */
async function endHelpers(): Promise<void> {
  const exits = children.splice(0).map((child) => {
    const exited = child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    return exited;
  });
  if (frozen) {
    run('fsfreeze', ['-u', mountPoint]);
    frozen = false;
  }
  await Promise.all(exits);
}

afterEach(async () => {
  if (!isRoot) return;
  await endHelpers();
  if (!frozen) {
    run('fsfreeze', ['-f', mountPoint]);
    frozen = true;
  }
});

afterAll(async () => {
  if (!isRoot) return;
  try {
    await endHelpers();
  } finally {
    try {
      if (frozen) run('fsfreeze', ['-u', mountPoint]);
    } finally {
      try {
        run('umount', [mountPoint]);
      } finally {
        if (device !== '') run('losetup', ['-d', device]);
        fs.rmSync(pkg, { recursive: true, force: true });
      }
    }
  }
});

function stateOf(pid: number): string | null {
  try {
    return parseStat(fs.readFileSync(`/proc/${pid}/stat`, 'utf8')).state;
  } catch {
    return null;
  }
}

/** The helper's command line for a call that began `sinceUnixMs`. */
function inCall(fn: string, gpu: number | '-', sinceUnixMs: number): string {
  return `gpugate-nvml-helper in ${fn} gpu ${gpu} since ${sinceUnixMs}`;
}

/**
 * Starts the stand-in helper with `argv0` as its whole command line. `stuck`: it appends to a file
 * on the frozen mount (state D until thawed); else it waits on an open pipe (state S, like an idle helper).
 */
async function startHelper(argv0: string, options: { stuck: boolean; asNobody?: boolean }): Promise<number> {
  started += 1;
  const script = path.join(pkg, `script-${started}`);
  // A file of its own: a file another helper created (as root) would refuse a write by nobody at once.
  fs.writeFileSync(script, options.stuck ? `echo x >> ${mountPoint}/f-${path.basename(script)}\n` : 'read line\n', { mode: 0o644 });
  const input = options.stuck ? fs.openSync(script, 'r') : 'pipe';
  const child = options.asNobody === true
    ? spawn('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', '--', '/bin/bash', '-c', 'exec -a "$0" "$1"', argv0, helper], { stdio: [input, 'ignore', 'ignore'] })
    : spawn(helper, [], { argv0, stdio: [input, 'ignore', 'ignore'] });
  if (typeof input === 'number') fs.closeSync(input);
  children.push(child);
  const pid = child.pid as number;
  const wanted = options.stuck ? 'D' : 'S';
  await until(`the stand-in helper ${pid} to reach state ${wanted} as ${argv0}`, () => {
    let cmdline = '';
    try {
      cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    } catch {
      return false;
    }
    return stateOf(pid) === wanted && cmdline === `${argv0}\0` && fs.readlinkSync(`/proc/${pid}/exe`) === helper;
  });
  return pid;
}

describe.skipIf(!isRoot)('a real helper stuck in the kernel', () => {
  it('is found by its exe link with its start time, wchan and call; an idle helper of the same file is counted running', async () => {
    const since = Date.now() - 3_600_000;
    const stuck = await startHelper(inCall('nvmlDeviceGetMemoryInfo_v2', 3, since), { stuck: true });
    await startHelper('gpugate-nvml-helper idle', { stuck: false });
    const scan = await findStuckNvmlHelpers(helper);
    const startTimeTicks = parseStat(fs.readFileSync(`/proc/${stuck}/stat`, 'utf8')).startTimeTicks;
    expect(scan.stuck).toEqual([{
      pid: stuck, startTimeTicks, wchan: expect.stringMatching(/^[a-z_][a-z0-9_.]*$/) as unknown, uid: 0, killPending: false, fileReplaced: false,
      state: { kind: 'in', call: { fn: 'nvmlDeviceGetMemoryInfo_v2', gpu: 3, sinceUnixMs: since } },
    }]);
    expect(scan.running).toBe(1);
    // The package's own helper path is not this copy: nothing of it runs here.
    expect(nvmlHelperPath(pkg)).toBe(helper);
    expect((await findStuckNvmlHelpers(nvmlHelperPath() ?? '/nonexistent')).stuck).toEqual([]);
  });

  it('counts a call in state D once it is older than the deadline, or at once when its session killed it (SIGKILL pending)', async () => {
    const pid = await startHelper(inCall('nvmlInit_v2', '-', Date.now()), { stuck: true });
    // A sample in state D alone is also any short ioctl: a young call is no reason to refuse.
    expect(await findStuckDriver({ helperPath: helper, stuckAfterMs: 600_000 })).toBeNull();
    await expect(refuseIfDriverStuck({ helperPath: helper, stuckAfterMs: 600_000 })).resolves.toBeUndefined();
    // The same call judged later than its deadline.
    const late = await findStuckDriver({ helperPath: helper, stuckAfterMs: 600_000, nowMs: Date.now() + 600_000 });
    expect(late?.helper.pid).toBe(pid);
    // Abandoned by its session: killed, and still asleep in the kernel.
    process.kill(pid, 'SIGKILL');
    await until('SIGKILL to be pending', () => (parseStatus(fs.readFileSync(`/proc/${pid}/status`, 'utf8')).get('ShdPnd') ?? '0').endsWith('100'));
    expect(stateOf(pid)).toBe('D');
    const stuck = await findStuckDriver({ helperPath: helper, stuckAfterMs: 600_000 });
    expect(stuck).toMatchObject({ helper: { pid, killPending: true, state: { kind: 'in', call: { fn: 'nvmlInit_v2', gpu: null } } }, others: 0 });
    const refusal = await refuseIfDriverStuck({ helperPath: helper, stuckAfterMs: 600_000 }).then(() => null, (error: unknown) => error);
    expect(refusal).toMatchObject({ name: 'NvmlError', code: 'GPUGATE_DRIVER_STUCK', fn: 'nvmlInit_v2', device: null });
    expect(String((refusal as Error).message)).toMatch(new RegExp(`in nvmlInit_v2 \\(helper pid ${pid}, state D, wchan \\S+, SIGKILL pending\\).*run \`gpugate doctor\``));
  });

  it('does not let another user\'s stuck copy of the helper block a root gate', async () => {
    const pid = await startHelper(inCall('nvmlDeviceGetMemoryInfo_v2', 0, Date.now() - 3_600_000), { stuck: true, asNobody: true });
    const scan = await findStuckNvmlHelpers(helper);
    expect(scan.stuck).toMatchObject([{ pid, uid: 65534 }]);
    expect(await findStuckDriver({ helperPath: helper, stuckAfterMs: 10_000 })).toBeNull();
  });
});

/** A host whose nvmlInit never answers: a command that opened NVML would end only at its deadline, with GPUGATE_TIMEOUT. */
function initHangs(): string {
  return writeScenario({ devices: [simDevice(0), simDevice(1)], faults: [{ function: 'nvmlInit_v2', hang: true }] });
}

/** The CLI of the package copy (whose helper is the stand-in). */
function runCopy(args: string[], scenario: string, killAfterMs = 60_000): ReturnType<typeof runCli> {
  return runCli(args, { env: cliEnv(scenario), launch: [process.execPath, path.join(pkg, 'dist', 'cli', 'main.js')], killAfterMs });
}

describe.skipIf(!isRoot)('a gate started while a helper is stuck', () => {
  it('`check` exits 69 before opening NVML, naming the call, GPU, since when, the helper and `gpugate doctor`', async () => {
    const since = Date.now() - 3_600_000;
    const pid = await startHelper(inCall('nvmlDeviceGetMemoryInfo_v2', 3, since), { stuck: true });
    const scenario = initHangs();
    // A deadline of ten minutes: had NVML been opened, the run would end (killed) long after the test's limit.
    const text = await runCopy(['check', '--nvml-timeout', '10m'], scenario);
    expect(text.code).toBe(69);
    expect(text.stderr).toContain(`stuck in the kernel since ${new Date(since).toISOString()} (`);
    expect(text.stderr).toContain(`in nvmlDeviceGetMemoryInfo_v2 on GPU 3 (helper pid ${pid}, state D, wchan `);
    expect(text.stderr).toContain('run `gpugate doctor`');
    const json = await runCopy(['check', '--nvml-timeout', '10m', '--json'], scenario);
    expect(json.code).toBe(69);
    expect(parseJsonOutput(json)).toMatchObject({ result: 'unavailable', exitCode: 69, error: { code: 'GPUGATE_DRIVER_STUCK' } });
  });

  it('`status` refuses the same way', async () => {
    const pid = await startHelper(inCall('nvmlDeviceGetMemoryInfo_v2', 1, Date.now() - 3_600_000), { stuck: true });
    const status = await runCopy(['status', '--nvml-timeout', '10m'], initHangs());
    expect(status.code).toBe(69);
    expect(status.stderr).toContain(`on GPU 1 (helper pid ${pid}, state D`);
    expect(status.stderr).toContain('run `gpugate doctor`');
  });

  it('the library\'s gate() resolves unavailable with a DriverStuckError carrying the helper', async () => {
    const pid = await startHelper(inCall('nvmlDeviceGetMemoryInfo_v2', 2, Date.now() - 3_600_000), { stuck: true });
    const copy = createRequire(path.join(pkg, 'package.json'))(path.join(pkg, 'dist', 'index.js')) as typeof import('../../src/index');
    process.env['GPUGATE_SIM_SCENARIO'] = initHangs();
    try {
      const outcome = await copy.gate({ mode: 'check', libraryPath: cliEnv(null)['GPUGATE_NVML_LIBRARY'] as string, callTimeoutMs: 600_000 });
      expect(outcome.result).toBe('unavailable');
      expect(outcome.library).toBeNull();
      expect(outcome.error).toMatchObject({ code: 'GPUGATE_DRIVER_STUCK', fn: 'nvmlDeviceGetMemoryInfo_v2', device: 2, helperPid: pid, helper: { pid, uid: 0 } });
    } finally {
      delete process.env['GPUGATE_SIM_SCENARIO'];
    }
  });

  it('an idle helper and a young call in state D are no reason to refuse: `check` reads the GPUs', async () => {
    await startHelper('gpugate-nvml-helper idle', { stuck: false });
    await startHelper(inCall('nvmlDeviceGetMemoryInfo_v2', 0, Date.now()), { stuck: true });
    const run = await runCopy(['check', '--nvml-timeout', '10m', '--json'], writeScenario({ devices: [simDevice(0)] }));
    expect(run.code).toBe(0);
    expect(parseJsonOutput(run)).toMatchObject({ result: 'ready', exitCode: 0 });
  });
});

describe.skipIf(!isRoot)('`gpugate doctor` when NVML hangs', () => {
  const kernelLog = (): string => {
    const file = path.join(pkg, 'kmsg.log');
    fs.writeFileSync(file, '6,1024,8812415032,-;NVRM: Xid (PCI:0000:5d:00): 79, pid=\'<unknown>\', name=<unknown>, GPU has fallen off the bus.\n');
    return file;
  };

  it('a stuck helper found at start: every NVML check says not responding, the rest of the report is complete, exit 69, NVML never opened', async () => {
    const pid = await startHelper(inCall('nvmlDeviceGetMemoryInfo_v2', 3, Date.now() - 3_600_000), { stuck: true });
    const run = await runCopy(['doctor', '--json', '--nvml-timeout', '10m', '--kernel-log', kernelLog()], initHangs());
    expect(run.code).toBe(69);
    const document = parseJsonOutput(run) as { exitCode: number; library: unknown; checks: Array<{ id: string; status: string; summary: string; evidence: Record<string, unknown> }> };
    const byId = (id: string): { status: string; summary: string; evidence: Record<string, unknown> } | undefined => document.checks.find((check) => check.id === id);
    expect(byId('driver.nvml')).toMatchObject({ status: 'fail', evidence: { code: 'GPUGATE_DRIVER_STUCK', helperPid: pid } });
    expect(byId('gpu.snapshot')?.evidence['helperPid']).toBe(pid);
    expect(byId('driver.nvml')?.summary).toMatch(/^NVML not responding \(stuck in the kernel for 36\d\d s in nvmlDeviceGetMemoryInfo_v2 on GPU 3\)$/);
    expect(byId('gpu.snapshot')?.summary).toMatch(/^reading the GPUs: not responding \(stuck in the kernel for 36\d\d s in nvmlDeviceGetMemoryInfo_v2 on GPU 3\)$/);
    expect(document.library).toBeNull();
    // The checks that need no NVML are all there.
    expect(byId('kernel.xid-79')?.status).toBe('fail');
    for (const id of ['driver.version-match', 'host.device-nodes', 'host.persistenced']) expect(byId(id), id).toBeDefined();
    expect(document.exitCode).toBe(69);
  });

  it('its own session missing the deadline: not responding with the deadline, and the rest of the report complete', async () => {
    const scenario = writeScenario({ devices: [simDevice(0)], faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', hang: true }] });
    const run = await runCopy(['doctor', '--json', '--nvml-timeout', '500ms', '--kernel-log', kernelLog()], scenario);
    expect(run.code).toBe(69);
    const document = parseJsonOutput(run) as { checks: Array<{ id: string; status: string; summary: string; evidence: Record<string, unknown> }> };
    const snapshot = document.checks.find((check) => check.id === 'gpu.snapshot');
    expect(snapshot).toMatchObject({ status: 'fail' });
    expect(snapshot?.summary).toMatch(/^reading the GPUs: not responding \(stuck in the kernel for 0\.5 s in nvmlDeviceGetMemoryInfo_v2 on GPU 0: no answer within its 500 ms deadline\)$/);
    // The helper doctor's own session abandoned, by pid: the one its message names.
    const helperPid = snapshot?.evidence['helperPid'];
    expect(typeof helperPid).toBe('number');
    expect(String(snapshot?.evidence['message'])).toContain(`pid ${String(helperPid)}`);
    expect(document.checks.find((check) => check.id === 'kernel.xid-79')?.status).toBe('fail');
    expect(document.checks.some((check) => check.id === 'host.device-nodes')).toBe(true);
  });
});

describe('`gpugate doctor` when a health query hangs in its own session', () => {
  it('names the hung call and GPU with its deadline, for that GPU and for the GPUs after it whose calls the hang closed', async () => {
    const scenario = writeScenario({ devices: [simDevice(0), simDevice(1), simDevice(2)], faults: [{ function: 'nvmlDeviceGetRemappedRows', device: 1, hang: true }] });
    const run = await runCli(['doctor', '--json', '--nvml-timeout', '500ms'], { env: cliEnv(scenario) });
    expect(run.code).toBe(69);
    const document = parseJsonOutput(run) as { checks: Array<{ id: string; subject: string; status: string; summary: string }> };
    const health = document.checks.filter((check) => check.id === 'gpu.health').map((check) => [check.subject.slice(0, 5), check.status, check.summary]);
    const text = 'the health readings: not responding (stuck in the kernel for 0.5 s in nvmlDeviceGetRemappedRows on GPU 1: no answer within its 500 ms deadline)';
    expect(health).toEqual([['GPU 1', 'fail', text], ['GPU 2', 'fail', text]]);
    expect(document.checks.some((check) => check.id === 'gpu.remapped-rows' && check.subject.startsWith('GPU 0 '))).toBe(true);
  });
});
