/**
 * `gpugate select` from the built command on the simulator: it chooses only GPUs that meet the
 * criteria, exactly --count of them, nearest on a PCI tree laid out in a fake sysfs, exits 75
 * (leasing nothing) when too few are eligible, waits with --wait; and its leases hold against
 * concurrent selectors (started together, none shares a GPU), end when the holder process is
 * killed, when the pid names another process, or after --lease DUR, and never remove a file
 * that is not a lease. A lease is exclusive: a MIG instance's covers its whole GPU and the
 * reverse, a wall-clock step frees none, --no-lease passes over others' leases, --lease alone
 * outlives a parent that exits, and in real PID namespaces (unshare) a lease the host could never
 * check is refused while one on the host's /proc names the holder's host pid.
 */
import { spawn, spawnSync } from 'node:child_process';
import { lstatSync, mkdirSync, readFileSync, readdirSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { cliEnv, cliPath, runCli, startCli, type CliRun } from '../helpers/cli';
import { goneProcessPid, isAlive, killSpawned, procPpid, spawnOrphan, spawnSleeper, until } from '../helpers/processes';
import { repoRoot, simDevice, writeScenario } from '../helpers/sim';
import { makeTestTempDir } from '../helpers/temp-root';
import { logText } from '../helpers/log-lines';

const GiB = 2 ** 30;
const work = makeTestTempDir('gpugate-select-');
afterAll(() => rmSync(work, { recursive: true, force: true }));
afterEach(async () => killSpawned());

let dirs = 0;
/** A fresh, empty lease directory. */
function leaseDir(): string {
  dirs += 1;
  return path.join(work, `leases-${dirs}`);
}

const uuidOf = (index: number): string => simDevice(index)['uuid'] as string;
const busy = (index: number): Record<string, unknown> => simDevice(index, { memory: { totalBytes: 97887 * 2 ** 20, reservedBytes: 471 * 2 ** 20, usedBytes: 50 * GiB } });

/** A host of `count` GPUs, those in `busyIndices` with 50 GiB in use. */
function host(count: number, busyIndices: number[] = []): string {
  return writeScenario({ devices: Array.from({ length: count }, (_, i) => (busyIndices.includes(i) ? busy(i) : simDevice(i))) });
}

function select(args: string[], scenario: string, leases: string, extra: NodeJS.ProcessEnv = {}): Promise<CliRun> {
  return runCli(['select', ...args], { env: cliEnv(scenario, { GPUGATE_LEASE_DIR: leases, GPUGATE_SYSFS_ROOT: path.join(work, 'no-sysfs'), ...extra }), killAfterMs: 60_000 });
}

/** The UUIDs of `CUDA_VISIBLE_DEVICES=…` on stdout. */
function chosen(run: CliRun): string[] {
  const match = /^CUDA_VISIBLE_DEVICES=(\S+)\n$/.exec(run.stdout);
  if (match === null) throw new Error(`no CUDA_VISIBLE_DEVICES line (exit ${run.code}): ${run.stdout}${run.stderr}`);
  return match[1]!.split(',');
}

function leaseFiles(dir: string): string[] {
  try {
    return readdirSync(dir).filter((name) => name.endsWith('.lease')).sort();
  } catch {
    return [];
  }
}

interface LeaseJson {
  holderPid: number | null;
  holderStartTicks: number | null;
  expiresAt: number | null;
  pidNamespace: string | null;
}

function leaseOf(dir: string, uuid: string): LeaseJson {
  return JSON.parse(readFileSync(path.join(dir, `${uuid}.lease`), 'utf8')) as LeaseJson;
}

/**
 * A sysfs tree for 8 simulated GPUs (bus 0x10 + index): GPUs 0–3 on NUMA node 0 behind host
 * bridge pci0000:00, 0–1 behind one PCIe switch and 2–3 behind another; GPUs 4–7 the same on
 * node 1 behind pci0000:80.
 */
function fakeSysfs(): string {
  dirs += 1;
  const root = path.join(work, `sysfs-${dirs}`);
  mkdirSync(path.join(root, 'bus', 'pci', 'devices'), { recursive: true });
  for (let index = 0; index < 8; index += 1) {
    const node = index < 4 ? 0 : 1;
    const bridge = node === 0 ? 'pci0000:00' : 'pci0000:80';
    const bus = node === 0 ? '00' : '80';
    const rootPort = `0000:${bus}:0${1 + Math.floor((index % 4) / 2)}.0`;
    const switchUp = `0000:${(Number.parseInt(bus, 16) + 1 + Math.floor((index % 4) / 2)).toString(16).padStart(2, '0')}:00.0`;
    const gpu = `0000:${(0x10 + index).toString(16)}:00.0`;
    const dir = path.join(root, 'devices', bridge, rootPort, switchUp, gpu);
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, 'numa_node'), `${node}\n`);
    symlinkSync(path.relative(path.join(root, 'bus', 'pci', 'devices'), dir), path.join(root, 'bus', 'pci', 'devices', gpu));
  }
  return root;
}

describe('gpugate select: which GPUs', () => {
  it('picks only free GPUs, exactly --count of them, and leases each to the caller (its parent process)', async () => {
    const leases = leaseDir();
    const run = await select(['--count', '2'], host(4, [0, 2]), leases);
    expect(run.code, run.stderr).toBe(0);
    expect(chosen(run)).toEqual([uuidOf(1), uuidOf(3)]);
    expect(logText(run.stderr)).toMatch(/selected gpus=1,3 /);
    expect(leaseFiles(leases)).toEqual([`${uuidOf(1)}.lease`, `${uuidOf(3)}.lease`]);
    // runCli spawns node itself, so the selector's parent is this test process.
    expect(leaseOf(leases, uuidOf(1)).holderPid).toBe(process.pid);
    const list = await select(['--count', '1', '--format', 'list'], host(4, [0, 2]), leaseDir());
    expect(list.stdout).toBe(`${uuidOf(1)}\n`);
  });

  it('exits 75 when fewer than --count are eligible, names why for each GPU, and leases nothing', async () => {
    const leases = leaseDir();
    const run = await select(['--count', '3'], host(4, [0, 2]), leases);
    expect(run.code).toBe(75);
    expect(run.stdout).toBe('');
    expect(logText(run.stderr)).toMatch(/not-eligible gpu=0 .*excluded=memory/);
    expect(logText(run.stderr)).toMatch(/2 of 4 GPUs eligible, 3 needed/);
    expect(leaseFiles(leases)).toEqual([]);
  });

  it('exits 78 when the selection holds fewer GPUs than --count: waiting could never help', async () => {
    const run = await select(['--count', '3', '--gpus', '0,1', '--wait', '--timeout', '30s'], host(4), leaseDir());
    expect(run.code).toBe(78);
    expect(logText(run.stderr)).toMatch(/3 GPUs requested but the selection \(option\) holds only 2/);
  });

  it('prefers GPUs behind one PCIe switch, then one NUMA node; plain NVML order when sysfs knows nothing', async () => {
    const sysfs = { GPUGATE_SYSFS_ROOT: fakeSysfs() };
    // GPU 0 busy: 1 and 2 come first in NVML order, but 2 and 3 share a switch.
    const pair = await select(['--count', '2', '--no-lease'], host(8, [0]), leaseDir(), sysfs);
    expect(chosen(pair)).toEqual([uuidOf(2), uuidOf(3)]);
    // GPUs 0 and 1 busy: three in NVML order (2, 3, 4) would span both nodes; 4, 5, 6 share node 1.
    const three = await select(['--count', '3', '--no-lease', '--json'], host(8, [0, 1]), leaseDir(), sysfs);
    const document = JSON.parse(three.stdout) as { gpus: Array<{ index: number; numaNode: number }>; candidates: Array<{ placement: { numaNode: number; hostBridge: string; upstream: string[] } }> };
    expect(document.gpus.map((gpu) => [gpu.index, gpu.numaNode])).toEqual([[4, 1], [5, 1], [6, 1]]);
    expect(document.candidates[5]!.placement).toEqual({ address: '0000:15:00.0', numaNode: 1, hostBridge: 'pci0000:80', upstream: ['0000:80:01.0', '0000:81:00.0'] });
    const plain = await select(['--count', '3', '--no-lease'], host(8, [0, 1]), leaseDir());
    expect(chosen(plain)).toEqual([uuidOf(2), uuidOf(3), uuidOf(4)]);
  });

  it('with --wait, polls until enough GPUs are free and stable; times out with 75 when they never are', async () => {
    const scenario = writeScenario({
      devices: [busy(0), busy(1)],
      timeline: [{ atMs: 2500, device: 1, set: { memory: { usedBytes: 0 } } }],
    });
    const run = await select(['--count', '1', '--wait', '--stable', '0s', '--interval', '100ms', '--timeout', '30s', '-v'], scenario, leaseDir());
    expect(run.code, run.stderr).toBe(0);
    expect(chosen(run)).toEqual([uuidOf(1)]);
    // It polled while GPU 1 was still busy, then took it.
    expect(logText(run.stderr)).toMatch(/poll gpu=1 .*why=memory[\s\S]*selected gpus=1 /);
    const never = await select(['--count', '1', '--wait', '--interval', '100ms', '--timeout', '500ms', '--json'], host(2, [0, 1]), leaseDir());
    expect(never.code).toBe(75);
    expect(JSON.parse(never.stdout)).toMatchObject({ result: 'timeout', gpus: [], cudaVisibleDevices: null });
  });

  it('passes over a GPU with a stale holder even when its memory meets the criteria', async () => {
    const orphan = await spawnOrphan('VLLM::Worker_TP6');
    const held = simDevice(0, { memory: { totalBytes: 97887 * 2 ** 20, reservedBytes: 471 * 2 ** 20, usedBytes: 512 * 2 ** 20 }, processes: [{ pid: orphan.pid, usedBytes: 512 * 2 ** 20, kinds: ['compute'] }] });
    const scenario = writeScenario({ devices: [held, simDevice(1)] });
    const check = await runCli(['check'], { env: cliEnv(scenario) });
    expect(check.code, 'check alone accepts 512 MiB used').toBe(0);
    const both = await select(['--count', '2'], scenario, leaseDir());
    expect(both.code).toBe(75);
    expect(logText(both.stderr)).toMatch(new RegExp(`not-eligible gpu=0 .*holders=${orphan.pid}/VLLM::Worker_TP6/orphan.* excluded=stale-holder`));
    const one = await select(['--count', '1'], scenario, leaseDir());
    expect(chosen(one)).toEqual([uuidOf(1)]);
  });

  it('ends a --wait on SIGTERM with 143, leasing nothing', async () => {
    const leases = leaseDir();
    const env = cliEnv(host(1, [0]), { GPUGATE_LEASE_DIR: leases, GPUGATE_SYSFS_ROOT: path.join(work, 'no-sysfs') });
    const waiting = startCli(['select', '--count', '1', '--wait', '--interval', '100ms', '--timeout', '60s', '-v'], { env, killAfterMs: 60_000 });
    await waiting.waitFor(/poll gpu=0 /);
    waiting.child.kill('SIGTERM');
    const run = await waiting.done;
    expect(run.code).toBe(143);
    expect(logText(run.stderr)).toMatch(/interrupted by SIGTERM/);
    expect(leaseFiles(leases)).toEqual([]);
  });

  it('refuses bad flags with exit 64, naming the flag', async () => {
    const scenario = host(2);
    const cases: Array<[string[], RegExp]> = [
      [[], /--count N is required/],
      [['--count', '0'], /--count "0": expected a whole number of GPUs, 1 or more/],
      [['--count', '1', '--timeout', '5s'], /--timeout only applies with --wait/],
      [['--count', '1', '--lease-pid', 'none'], /--lease-pid none needs --lease DUR/],
      [['--count', '1', '--lease-pid', 'shell'], /--lease-pid "shell": expected a process id/],
      [['--count', '1', '--no-lease', '--lease', '1h'], /--no-lease excludes --lease/],
      [['--count', '1', '--format', 'text'], /--format "text": expected env, json or list/],
      [['--count', '1', '--kill-stale'], /--kill-stale is an option of/],
    ];
    for (const [args, message] of cases) {
      const run = await select(args, scenario, leaseDir());
      expect(run.code, args.join(' ')).toBe(64);
      expect(logText(run.stderr), args.join(' ')).toMatch(message);
    }
    // `bash -c 'gpugate … --lease-pid $$'` execs gpugate in place of the shell: $$ is gpugate itself.
    const self = spawnSync('bash', ['-c', `exec "${process.execPath}" "${cliPath()}" select --count 1 --lease-pid $$`], { env: cliEnv(scenario, { GPUGATE_LEASE_DIR: leaseDir() }), encoding: 'utf8' });
    expect(self.status).toBe(64);
    expect(logText(self.stderr)).toMatch(/names this gpugate process, which exits as soon as it has printed/);
  });
});

describe('gpugate select: leases', () => {
  it('never hands one GPU to two of 8 selectors started at once, nor to two of 4 taking 2 each', async () => {
    const scenario = host(8);
    for (const [selectors, count] of [[8, 1], [4, 2]] as const) {
      const leases = leaseDir();
      const runs = await Promise.all(Array.from({ length: selectors }, () => select(['--count', String(count)], scenario, leases)));
      for (const run of runs) expect(run.code, run.stderr).toBe(0);
      const taken = runs.flatMap(chosen);
      expect(taken).toHaveLength(8);
      expect(new Set(taken).size).toBe(8);
      expect(leaseFiles(leases)).toHaveLength(8);
      const late = await select(['--count', '1'], scenario, leases);
      expect(late.code).toBe(75);
      expect(logText(late.stderr)).toMatch(/excluded=leased lease="leased to pid \d+/);
    }
  });

  it('frees a lease when its holder process is killed, and replaces the stale record', async () => {
    const scenario = host(2);
    const leases = leaseDir();
    const holder = await spawnSleeper();
    const first = await select(['--count', '2', '--lease-pid', String(holder)], scenario, leases);
    expect(first.code, first.stderr).toBe(0);
    expect(leaseOf(leases, uuidOf(0)).holderPid).toBe(holder);
    const refused = await select(['--count', '1'], scenario, leases);
    expect(refused.code).toBe(75);
    expect(logText(refused.stderr)).toMatch(new RegExp(`leased to pid ${holder} \\(sleep\\)`));
    process.kill(holder, 'SIGKILL');
    await until(`holder ${holder} to die`, () => !isAlive(holder));
    const after = await select(['--count', '2'], scenario, leases);
    expect(after.code, after.stderr).toBe(0);
    // The new record names the new holder (the inode number itself may be reused by the file system).
    expect(leaseOf(leases, uuidOf(0)).holderPid).toBe(process.pid);
    expect(Number(/lease_pid=(\d+)/.exec(after.stderr)?.[1])).toBe(process.pid);
  });

  it('treats a lease whose pid is gone or names another process as free, and one it cannot check as taken', async () => {
    const scenario = host(4);
    const leases = leaseDir();
    mkdirSync(leases, { recursive: true });
    const ownStat = readFileSync('/proc/self/stat', 'utf8');
    const ownTicks = Number(ownStat.slice(ownStat.lastIndexOf(')') + 2).split(' ')[19]);
    const namespace = readlinkSync('/proc/self/ns/pid');
    const record = (index: number, fields: Record<string, unknown>): void => {
      const body = { kind: 'gpugate-lease', uuid: uuidOf(index), parentUuid: null, holderPid: process.pid, holderStartTicks: ownTicks, holderComm: 'node', pidNamespace: namespace, bootId: null, createdAt: Date.now(), expiresAt: null, sinceBootMs: null, expiresSinceBootMs: null, selectorPid: 1, ...fields };
      writeFileSync(path.join(leases, `${uuidOf(index)}.lease`), JSON.stringify(body));
    };
    record(0, { holderPid: await goneProcessPid() }); // the holder has exited
    record(1, { holderStartTicks: ownTicks + 1 }); // this pid, but a process started at another time: reused
    record(2, { pidNamespace: 'pid:[1]' }); // another PID namespace: cannot be checked, so taken
    record(3, {}); // a live holder
    const json = await select(['--count', '2', '--json'], scenario, leases);
    expect(json.code, json.stderr).toBe(0);
    const document = JSON.parse(json.stdout) as { gpus: Array<{ index: number }>; candidates: Array<{ index: number; lease: { state: string; reason: string } }> };
    expect(document.gpus.map((gpu) => gpu.index)).toEqual([0, 1]);
    expect(document.candidates[0]!.lease.reason).toMatch(/has exited/);
    expect(document.candidates[1]!.lease.reason).toMatch(/the pid now names another process/);
    expect(document.candidates[2]!.lease).toMatchObject({ state: 'held', reason: expect.stringMatching(/cannot be checked/) });
    expect(document.candidates[3]!.lease).toMatchObject({ state: 'held' });
    expect(leaseOf(leases, uuidOf(2)).pidNamespace).toBe('pid:[1]');
  });

  it('never removes or follows what is not a lease in a lease file\'s place', async () => {
    const scenario = host(2);
    const leases = leaseDir();
    mkdirSync(leases, { recursive: true });
    const target = path.join(work, 'not-a-lease.txt');
    writeFileSync(target, 'precious\n');
    writeFileSync(path.join(leases, `${uuidOf(0)}.lease`), 'precious\n');
    symlinkSync(target, path.join(leases, `${uuidOf(1)}.lease`));
    const run = await select(['--count', '1'], scenario, leases);
    expect(run.code).toBe(75);
    expect(logText(run.stderr)).toMatch(/does not hold a gpugate lease/);
    expect(logText(run.stderr)).toMatch(/is a symbolic link, not a lease/);
    expect(readFileSync(path.join(leases, `${uuidOf(0)}.lease`), 'utf8')).toBe('precious\n');
    expect(lstatSync(path.join(leases, `${uuidOf(1)}.lease`)).isSymbolicLink()).toBe(true);
    expect(readFileSync(target, 'utf8')).toBe('precious\n');
  });

  it('with --lease DUR --lease-pid none, holds the GPUs for DUR only', async () => {
    const scenario = host(1);
    const leases = leaseDir();
    const first = await select(['--count', '1', '--lease', '5s', '--lease-pid', 'none', '--json'], scenario, leases);
    expect(first.code, first.stderr).toBe(0);
    const lease = leaseOf(leases, uuidOf(0));
    expect(lease.holderPid).toBeNull();
    expect(lease.expiresAt).not.toBeNull();
    const refused = await select(['--count', '1'], scenario, leases);
    expect(refused.code).toBe(75);
    expect(logText(refused.stderr)).toMatch(/leased until /);
    const after = await selectOnceBootClockPasses((lease as StoredLease).expiresSinceBootMs!, ['--count', '1'], scenario, leases);
    expect(after.code, after.stderr).toBe(0);
  });

  it('waits its turn while another process holds the lease lock, and goes on once the kernel drops it at that process\'s death', async () => {
    const scenario = host(1);
    const leases = leaseDir();
    mkdirSync(leases, { recursive: true });
    // The lock file as a selector makes it: private (0600). A shareable one (0644) is replaced, not waited for (test/host/root-file-writes.test.ts).
    const lockHolder = spawn(process.execPath, ['-e', `const b = require('node-gyp-build')(${JSON.stringify(repoRoot())}); const fd = require('fs').openSync(${JSON.stringify(path.join(leases, '.lock'))}, 'a', 0o600); if (!b.flockExclusive(fd)) process.exit(3); console.log('locked'); setTimeout(() => {}, 60000);`], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      await new Promise<void>((resolve) => lockHolder.stdout!.once('data', () => resolve()));
      const selecting = select(['--count', '1'], scenario, leases);
      let finished = false;
      void selecting.then(() => (finished = true));
      // It cannot have decided: the lock is held. Give it time to try, then end the holder.
      await new Promise((resolve) => setTimeout(resolve, 1500));
      expect(finished).toBe(false);
      expect(leaseFiles(leases)).toEqual([]);
      lockHolder.kill('SIGKILL');
      const run = await selecting;
      expect(run.code, run.stderr).toBe(0);
      expect(chosen(run)).toEqual([uuidOf(0)]);
    } finally {
      lockHolder.kill('SIGKILL');
    }
  });

  it('refuses to lease to a process that does not exist (64), leasing nothing', async () => {
    const leases = leaseDir();
    const gone = await goneProcessPid();
    const run = await select(['--count', '2', '--lease-pid', String(gone)], host(2), leases);
    expect(run.code).toBe(64);
    expect(logText(run.stderr)).toMatch(new RegExp(`cannot lease to pid ${gone}: holder pid ${gone} has exited`));
    expect(leaseFiles(leases)).toEqual([]);
  });

  it('fails with an OS error (71) naming the lease directory when it cannot be created', async () => {
    const file = path.join(work, 'a-file');
    writeFileSync(file, '');
    const run = await select(['--count', '1'], host(1), path.join(file, 'leases'));
    expect(run.code).toBe(71);
    expect(logText(run.stderr)).toMatch(/cannot create the lease directory .*a-file\/leases: ENOTDIR/);
  });
});

/** Milliseconds since boot now (CLOCK_BOOTTIME, as /proc/uptime shows it): the clock lease durations run on. */
function bootClockMs(): number {
  return Math.round(Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]) * 1000);
}

/** Why a time namespace (its own boot clock, `unshare --time`) cannot be made here, or null. */
function timeNamespaceUnavailable(): string | null {
  if (process.getuid?.() !== 0) return 'needs root for unshare --time';
  const probe = spawnSync('unshare', ['--time', '--boottime', '1', '--fork', 'true'], { stdio: 'ignore' });
  return probe.status === 0 ? null : 'unshare --time is not available';
}
const noTimeNamespace = timeNamespaceUnavailable();

/**
 * `gpugate select ARGS` once the boot clock has passed `bootMs`: in a time namespace whose boot
 * clock runs that far ahead (its /proc/uptime too), so nothing waits; where none can be made, after
 * waiting for the real clock.
 */
async function selectOnceBootClockPasses(bootMs: number, args: string[], scenario: string, leases: string): Promise<CliRun> {
  if (noTimeNamespace !== null) {
    await until('the lease to run out on the boot clock', () => bootClockMs() > bootMs, 20_000);
    return select(args, scenario, leases);
  }
  const aheadSeconds = Math.max(1, Math.ceil((bootMs - bootClockMs()) / 1000) + 1);
  return runCli(['select', ...args], {
    env: cliEnv(scenario, { GPUGATE_LEASE_DIR: leases, GPUGATE_SYSFS_ROOT: path.join(work, 'no-sysfs') }),
    launch: ['unshare', '--time', '--boottime', String(aheadSeconds), '--fork', '--', process.execPath, cliPath()],
    killAfterMs: 60_000,
  });
}

interface StoredLease extends LeaseJson {
  uuid: string;
  parentUuid: string | null;
  createdAt: number;
  sinceBootMs: number | null;
  expiresSinceBootMs: number | null;
}

/** Rewrites fields of a lease record in place (what another clock, or an earlier writer, would have put there). */
function editLease(dir: string, uuid: string, change: (record: StoredLease) => Partial<StoredLease>): void {
  const file = path.join(dir, `${uuid}.lease`);
  const record = JSON.parse(readFileSync(file, 'utf8')) as StoredLease;
  writeFileSync(file, JSON.stringify({ ...record, ...change(record) }));
}

interface SelectJson {
  gpus: Array<{ index: number; uuid: string }>;
  candidates: Array<{ index: number; uuid: string; exclusions: string[]; lease: { state: string; reason: string } | null }>;
}

/** A shell script (or unshare running one) to completion, its output collected. */
function runScript(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(killer);
      resolve({ code, stdout, stderr });
    });
  });
}

const MIG_A = 'MIG-4a1c7e92-3b5d-5f08-9c2e-6d1a8b4f7e30';
const MIG_B = 'MIG-b83e05d1-7c4a-5e19-a2f6-0e9d3c7b5a41';

/** GPU 0 in MIG mode with two idle instances (MIG_A, MIG_B), GPU 1 a plain one. */
function migHost(): string {
  const instance = (slot: number, uuid: string): Record<string, unknown> => ({
    slot, uuid, name: 'NVIDIA RTX PRO 6000 Blackwell Server Edition MIG 1g.24gb', gpuInstanceId: 3 + slot, computeInstanceId: 0,
    memory: { totalBytes: 25098715136, reservedBytes: 0, usedBytes: 0 }, processes: [],
  });
  return writeScenario({ devices: [simDevice(0, { migMode: true, maxMigDevices: 4, migDevices: [instance(0, MIG_A), instance(1, MIG_B)] }), simDevice(1)] });
}

describe('gpugate select: a lease is exclusive', () => {
  it('a lease on a MIG instance covers its whole GPU and the reverse, also between selectors started together; a sibling instance stays free', async () => {
    const scenario = migHost();
    const whole = uuidOf(0);
    const holder = await spawnSleeper();
    // Started together, one selector for the instance and one for its whole GPU: only one may have it.
    const raced = leaseDir();
    const race = await Promise.all([
      select(['-n', '1', '--gpus', MIG_A, '--lease-pid', String(holder)], scenario, raced),
      select(['-n', '1', '--gpus', whole, '--lease-pid', String(holder)], scenario, raced),
    ]);
    expect(race.map((run) => run.code).sort(), race.map((run) => run.stderr).join('')).toEqual([0, 75]);
    expect(leaseFiles(raced)).toHaveLength(1);

    // The instance leased: its whole GPU is taken, its sibling is not.
    const leases = leaseDir();
    const instance = await select(['-n', '1', '--gpus', MIG_A, '--lease-pid', String(holder)], scenario, leases);
    expect(chosen(instance)).toEqual([MIG_A]);
    expect(JSON.parse(readFileSync(path.join(leases, `${MIG_A}.lease`), 'utf8'))).toMatchObject({ uuid: MIG_A, parentUuid: whole, holderPid: holder });
    const wholeRefused = await select(['-n', '1', '--gpus', whole], scenario, leases);
    expect(wholeRefused.code).toBe(75);
    expect(logText(wholeRefused.stderr)).toMatch(new RegExp(`not-eligible gpu=0 .*excluded=leased lease="covered by the lease on its MIG instance ${MIG_A}: leased to pid ${holder} \\(sleep\\)"`));
    const sibling = await select(['-n', '1', '--gpus', MIG_B, '--no-lease'], scenario, leases);
    expect(chosen(sibling)).toEqual([MIG_B]);
    process.kill(holder, 'SIGKILL');
    await until(`holder ${holder} to die`, () => !isAlive(holder));

    // The whole GPU leased: each of its instances is taken.
    const second = await spawnSleeper();
    const gpu = await select(['-n', '1', '--gpus', whole, '--lease-pid', String(second)], scenario, leases);
    expect(chosen(gpu)).toEqual([whole]);
    for (const uuid of [MIG_A, MIG_B]) {
      const refused = await select(['-n', '1', '--gpus', uuid, '--no-lease'], scenario, leases);
      expect(refused.code, uuid).toBe(75);
      expect(logText(refused.stderr)).toMatch(new RegExp(`lease="covered by the lease on its whole GPU ${whole}: leased to pid ${second} \\(sleep\\)"`));
    }
    process.kill(second, 'SIGKILL');
    await until(`holder ${second} to die`, () => !isAlive(second));
    const freed = await select(['-n', '1', '--gpus', MIG_A, '--lease-pid', String(process.pid)], scenario, leases);
    expect(chosen(freed)).toEqual([MIG_A]);
  });

  it('a wall-clock step frees no lease: a live holder keeps its GPUs and durations run on the boot clock', async () => {
    const scenario = host(2);
    const leases = leaseDir();
    const holder = await spawnSleeper();
    expect((await select(['-n', '1', '--gpus', '0', '--lease', '1h', '--lease-pid', String(holder)], scenario, leases)).code).toBe(0);
    expect((await select(['-n', '1', '--gpus', '1', '--lease', '1h', '--lease-pid', 'none'], scenario, leases)).code).toBe(0);
    // The wall clock stepped two hours forward since: both leases' wall-clock times now lie well in the past.
    const stepMs = 2 * 3_600_000;
    for (const index of [0, 1]) editLease(leases, uuidOf(index), (record) => ({ createdAt: record.createdAt - stepMs, expiresAt: record.expiresAt! - stepMs }));
    const stepped = await select(['-n', '1', '--json'], scenario, leases);
    expect(stepped.code, stepped.stderr).toBe(75);
    const document = JSON.parse(stepped.stdout) as SelectJson;
    expect(document.candidates[0]!.lease).toMatchObject({ state: 'held', reason: expect.stringMatching(new RegExp(`^leased to pid ${holder} \\(sleep\\) until `)) });
    expect(document.candidates[1]!.lease).toMatchObject({ state: 'held', reason: expect.stringMatching(/^leased until /) });
    // Nor does a step backward extend one: by the boot clock GPU 1's hour is over, whatever the wall clock says.
    editLease(leases, uuidOf(1), () => ({ expiresAt: Date.now() + stepMs, sinceBootMs: Math.max(0, bootClockMs() - 3_601_000), expiresSinceBootMs: bootClockMs() - 1000 }));
    const over = await select(['-n', '1', '--json'], scenario, leases);
    expect(over.code, over.stderr).toBe(0);
    const after = JSON.parse(over.stdout) as SelectJson;
    expect(after.gpus.map((gpu) => gpu.index)).toEqual([1]);
    expect(after.candidates[1]!.lease).toMatchObject({ state: 'stale', reason: expect.stringMatching(/^expired .* ago \(measured on the boot clock\)$/) });
    expect(after.candidates[0]!.lease).toMatchObject({ state: 'held' });
  });

  it('--no-lease shows what would be chosen now: GPUs leased to others are passed over, and nothing is written', async () => {
    const scenario = host(2);
    const leases = leaseDir();
    const holder = await spawnSleeper();
    expect(chosen(await select(['-n', '1', '--lease-pid', String(holder)], scenario, leases))).toEqual([uuidOf(0)]);
    const look = await select(['-n', '1', '--no-lease'], scenario, leases);
    expect(chosen(look)).toEqual([uuidOf(1)]);
    const two = await select(['-n', '2', '--no-lease'], scenario, leases);
    expect(two.code).toBe(75);
    expect(logText(two.stderr)).toMatch(new RegExp(`not-eligible gpu=0 .*excluded=leased lease="leased to pid ${holder} \\(sleep\\)"`));
    expect(leaseFiles(leases)).toEqual([`${uuidOf(0)}.lease`]);
    const untouched = leaseDir();
    expect(chosen(await select(['-n', '2', '--no-lease'], scenario, untouched))).toEqual([uuidOf(0), uuidOf(1)]);
    expect(() => lstatSync(untouched)).toThrow(/ENOENT/);
  });

  it('--lease DUR alone is bounded by the duration: selectors run from subshells that exit at once never share a GPU', async () => {
    const scenario = host(4);
    const leases = leaseDir();
    const selectCommand = `"${process.execPath}" "${cliPath()}" select -n 2 --lease 20s`;
    // `; true` keeps each subshell from exec'ing gpugate: the subshell is gpugate's parent, and exits right after it.
    const run = await runScript('bash', ['-c', `( ${selectCommand}; true ); ( ${selectCommand}; true )`], cliEnv(scenario, { GPUGATE_LEASE_DIR: leases, GPUGATE_SYSFS_ROOT: path.join(work, 'no-sysfs') }));
    const lines = run.stdout.trim().split('\n');
    expect(lines, run.stderr).toHaveLength(2);
    const taken = lines.flatMap((line) => chosen({ code: 0, signal: null, stdout: `${line}\n`, stderr: '', elapsedMs: 0 }));
    expect(new Set(taken).size).toBe(4);
    for (const uuid of taken) expect(leaseOf(leases, uuid)).toMatchObject({ holderPid: null, expiresAt: expect.any(Number) });
    expect(logText(run.stderr)).toMatch(/lease_pid=none lease_until=/);
  });
});

/** Why a PID namespace cannot be made here (needs root and util-linux unshare), or null. */
function namespaceUnavailable(): string | null {
  if (process.getuid?.() !== 0) return 'needs root for unshare --pid';
  if (readlinkSync('/proc/self/ns/pid') !== 'pid:[4026531836]') return 'the tests run in a nested PID namespace already';
  const probe = spawnSync('unshare', ['--pid', '--fork', '--mount-proc', 'true'], { stdio: 'ignore' });
  return probe.status === 0 ? null : 'unshare --pid --fork --mount-proc is not available';
}
const noNamespace = namespaceUnavailable();

describe.skipIf(noNamespace !== null)(`gpugate select in a nested PID namespace${noNamespace === null ? '' : ` (skipped: ${noNamespace})`}`, () => {
  const selectIn = (flags: string, after = ''): string => `"${process.execPath}" "${cliPath()}" select -n 1 ${flags}; echo "exit=$?"; ${after}`;
  const env = (scenario: string, leases: string): NodeJS.ProcessEnv => cliEnv(scenario, { GPUGATE_LEASE_DIR: leases, GPUGATE_SYSFS_ROOT: path.join(work, 'no-sysfs') });

  it('with its own /proc, refuses a lease bound only to a process the host could never check (78), and says when one with a duration ends for the host', async () => {
    const scenario = host(1);
    const leases = leaseDir();
    // gpugate's parent is the namespace's shell (pid 1 there): a lease bound to it alone would never end for the host.
    const refused = await runScript('unshare', ['--pid', '--fork', '--kill-child', '--mount-proc', 'bash', '-c', selectIn('')], env(scenario, leases));
    expect(refused.stdout).toMatch(/exit=78/);
    expect(logText(refused.stderr)).toMatch(/gpugate reads the \/proc of PID namespace pid:\[\d+\], not the host's pid:\[4026531836\]: a lease bound to pid 1 could never be checked from the host/);
    expect(leaseFiles(leases)).toEqual([]);
    // With a duration it is taken, and the output says that the host frees it only then.
    const timed = await runScript('unshare', ['--pid', '--fork', '--kill-child', '--mount-proc', 'bash', '-c', selectIn('--lease 2s --lease-pid $$')], env(scenario, leases));
    expect(timed.stdout, timed.stderr).toMatch(/exit=0/);
    expect(logText(timed.stderr)).toMatch(/lease: gpugate reads the \/proc of PID namespace .*: the host cannot check holder pid 1, so for it the lease ends only after 2s/);
    const record = JSON.parse(readFileSync(path.join(leases, `${uuidOf(0)}.lease`), 'utf8')) as StoredLease;
    expect(record.pidNamespace).not.toBe('pid:[4026531836]');
    const held = await select(['-n', '1'], scenario, leases);
    expect(held.code).toBe(75);
    expect(logText(held.stderr)).toMatch(/lease="leased to pid 1 \(bash\) in PID namespace pid:\[\d+\], which cannot be checked from pid:\[4026531836\] until /);
    const freed = await selectOnceBootClockPasses(record.expiresSinceBootMs!, ['-n', '1'], scenario, leases);
    expect(freed.code, freed.stderr).toBe(0);
  });

  it("sharing the host's /proc, records the holder by its host pid, so the host frees the lease when the holder dies", async () => {
    const scenario = host(1);
    const leases = leaseDir();
    // The namespace's shell selects (for itself, its parent) and stays alive as the holder.
    const nested = spawn('unshare', ['--pid', '--fork', '--kill-child', 'bash', '-c', selectIn('', 'exec sleep 120')], { env: env(scenario, leases), stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    nested.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    try {
      await until('the nested selector to finish', () => /exit=\d+/.test(out), 20_000);
      expect(out).toMatch(/exit=0/);
      const record = leaseOf(leases, uuidOf(0));
      // The shell is pid 1 in its namespace; the record names it as the host does, in the host's namespace.
      const shell = readdirSync('/proc').filter((name) => /^\d+$/.test(name)).find((name) => procPpid(Number(name)) === nested.pid);
      expect(shell).toBeDefined();
      expect(readFileSync(`/proc/${shell}/status`, 'utf8')).toMatch(new RegExp(`NSpid:\\s+${shell}\\s+1\\n`));
      expect(record).toMatchObject({ holderPid: Number(shell), pidNamespace: 'pid:[4026531836]' });
      const held = await select(['-n', '1'], scenario, leases);
      expect(held.code).toBe(75);
      expect(logText(held.stderr)).toMatch(new RegExp(`lease="leased to pid ${shell} \\((bash|sleep)\\)"`));
      process.kill(Number(shell), 'SIGKILL');
      await until('the nested namespace to end', () => nested.exitCode !== null || nested.signalCode !== null, 20_000);
      const freed = await select(['-n', '1'], scenario, leases);
      expect(freed.code, freed.stderr).toBe(0);
    } finally {
      nested.kill('SIGKILL');
    }
  });

  it("as the namespace's first process (its parent outside), asks for --lease-pid or --lease with 64 instead of failing", async () => {
    const scenario = host(1);
    const leases = leaseDir();
    const run = await runScript('unshare', ['--pid', '--fork', '--kill-child', '--mount-proc', process.execPath, cliPath(), 'select', '-n', '1'], env(scenario, leases));
    expect(run.code).toBe(64);
    expect(logText(run.stderr)).toMatch(/gpugate's parent is outside its PID namespace \(getppid\(\) is 0\)/);
    expect(leaseFiles(leases)).toEqual([]);
  });
});

