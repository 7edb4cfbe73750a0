/**
 * What a tool author gets from selectGpus beyond the choice, through the real addon and the
 * simulator with a real lease directory: `cudaVisibleDevices` (the very string the command
 * prints), `release()` giving the GPUs back so that another process (the built command) can take
 * them, harmless when repeated, never removing a lease another selector wrote since, and
 * removing nothing through a lease directory an unprivileged user (setpriv) replaced by a
 * symbolic link; and errors a library caller reads: they name the lease directory (never a
 * temporary file) and no command-line flag (an empty selection, a hung NVML call), which only
 * the command adds.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { DeviceSelectionError } from '../../src/gate/device-selection-error';
import { gate } from '../../src/gate/gate';
import { selectGpus } from '../../src/gate/select';
import { FileSystemError, UnsafePathError } from '../../src/host/safe-file';
import { cliEnv, runCli, type CliRun } from '../helpers/cli';
import { isAlive, killSpawned, spawnSleeper, until } from '../helpers/processes';
import { simDevice } from '../helpers/sim';
import { makeTestTempDir } from '../helpers/temp-root';
import { freshSimulator, useScenario } from '../helpers/session-helpers';
import { logText } from '../helpers/log-lines';

const work = makeTestTempDir('gpugate-select-release-');
afterAll(() => rmSync(work, { recursive: true, force: true }));
const cleanups: Array<() => void> = [];
afterEach(async () => {
  await killSpawned();
  for (const cleanup of cleanups.splice(0)) cleanup();
});

const sysfsRoot = path.join(work, 'no-sysfs');
let dirs = 0;
function freshDir(name: string): string {
  dirs += 1;
  return path.join(work, `${name}-${dirs}`);
}

function leaseFiles(dir: string): string[] {
  return existsSync(dir) ? readdirSync(dir).filter((name) => name.endsWith('.lease')).sort() : [];
}

/** `gpugate select` as another process, on the same scenario and lease directory. */
function selectCommand(args: string[], scenario: string, leaseDir: string, extra: NodeJS.ProcessEnv = {}): Promise<CliRun> {
  return runCli(['select', ...args], { env: cliEnv(scenario, { GPUGATE_LEASE_DIR: leaseDir, GPUGATE_SYSFS_ROOT: sysfsRoot, ...extra }), killAfterMs: 60_000 });
}

describe('selectGpus: cudaVisibleDevices and release()', () => {
  it('gives the string the command prints, and release() lets another process take the GPUs; a second release is harmless', async () => {
    const libraryPath = freshSimulator();
    const scenario = useScenario({ devices: [simDevice(0), simDevice(1)] });
    const leaseDir = freshDir('leases');
    const mine = await selectGpus({ libraryPath, count: 2, leaseDir, sysfsRoot });
    expect(mine.result).toBe('selected');
    expect(mine.cudaVisibleDevices).toBe(mine.gpus.map((gpu) => gpu.uuid).join(','));
    expect(leaseFiles(leaseDir)).toHaveLength(2);

    const refused = await selectCommand(['--count', '2'], scenario, leaseDir);
    expect(refused.code, refused.stderr).toBe(75);

    const released = await mine.release();
    expect(released.map((entry) => [entry.uuid, entry.result])).toEqual(mine.gpus.map((gpu) => [gpu.uuid, 'removed']));
    expect(leaseFiles(leaseDir)).toEqual([]);

    const taken = await selectCommand(['--count', '2', '--json'], scenario, leaseDir);
    expect(taken.code, taken.stderr).toBe(0);
    // One function computes the string for both: the command's JSON shows the same one.
    expect((JSON.parse(taken.stdout) as { cudaVisibleDevices: string }).cudaVisibleDevices).toBe(mine.cudaVisibleDevices);
    const theirs = leaseFiles(leaseDir);
    expect(theirs).toHaveLength(2);

    const again = await mine.release();
    expect(again.map((entry) => entry.result)).toEqual(['kept', 'kept']);
    expect(again[0]!.reason).toMatch(/not the lease this process wrote: another lease is there now/);
    expect(leaseFiles(leaseDir)).toEqual(theirs);
  });

  it('releasing twice removes once and then reports the leases gone; a selection that leased nothing releases nothing', async () => {
    const libraryPath = freshSimulator();
    useScenario({ devices: [simDevice(0), simDevice(1, { memory: { totalBytes: 96 * 2 ** 30, reservedBytes: 0, usedBytes: 60 * 2 ** 30 } })] });
    const leaseDir = freshDir('leases');
    const mine = await selectGpus({ libraryPath, count: 1, leaseDir, sysfsRoot });
    expect((await mine.release()).map((entry) => entry.result)).toEqual(['removed']);
    const second = await mine.release();
    expect(second).toEqual([{ uuid: mine.gpus[0]!.uuid, path: path.join(leaseDir, `${mine.gpus[0]!.uuid}.lease`), result: 'gone', reason: expect.stringMatching(/no lease file/) }]);

    const busy = await selectGpus({ libraryPath, count: 2, leaseDir, sysfsRoot });
    expect(busy.result).toBe('busy');
    expect(busy.cudaVisibleDevices).toBeNull();
    expect(await busy.release()).toEqual([]);
    const looked = await selectGpus({ libraryPath, count: 1, leaseDir, sysfsRoot, lease: false });
    expect(looked.cudaVisibleDevices).toBe(looked.gpus[0]!.uuid);
    expect(await looked.release()).toEqual([]);
  });

  it('never removes the lease another selector wrote after judging this one stale', async () => {
    const libraryPath = freshSimulator();
    const scenario = useScenario({ devices: [simDevice(0)] });
    const leaseDir = freshDir('leases');
    const holder = await spawnSleeper();
    const mine = await selectGpus({ libraryPath, count: 1, leaseDir, sysfsRoot, leaseHolderPid: holder });
    expect(mine.result).toBe('selected');
    process.kill(holder, 'SIGKILL');
    await until(`holder ${holder} to die`, () => !isAlive(holder));
    const other = await selectCommand(['--count', '1'], scenario, leaseDir);
    expect(other.code, other.stderr).toBe(0);
    const file = path.join(leaseDir, `${mine.gpus[0]!.uuid}.lease`);
    const theirs = readFileSync(file, 'utf8');
    expect(JSON.parse(theirs)).toMatchObject({ holderPid: process.pid });

    const released = await mine.release();
    expect(released).toEqual([{ uuid: mine.gpus[0]!.uuid, path: file, result: 'kept', reason: expect.stringMatching(/another lease is there now \(leased to pid \d+/) }]);
    expect(readFileSync(file, 'utf8')).toBe(theirs);
  });
});

describe('release() through a lease directory another user replaced', () => {
  const hasSetpriv = spawnSync('setpriv', ['--version']).status === 0;

  it.skipIf(!hasSetpriv || process.getuid?.() !== 0)('rejects naming the symbolic link, and removes nothing where it points, not even a copy of its own lease', async () => {
    const libraryPath = freshSimulator();
    useScenario({ devices: [simDevice(0)] });
    // A shared folder like /tmp: everyone may add names, none may remove another's. Made in the OS
    // temp folder, since uid 65534 cannot pass through the test run's private one.
    const shared = mkdtempSync(path.join(tmpdir(), 'gpugate-shared-'));
    chmodSync(shared, 0o1777);
    cleanups.push(() => rmSync(shared, { recursive: true, force: true }));
    const leaseDir = path.join(shared, 'leases');
    const mine = await selectGpus({ libraryPath, count: 1, leaseDir, sysfsRoot });
    expect(mine.result).toBe('selected');
    // The directory is cleaned away (a tmpfiles rule, an administrator), and uid 65534 puts a
    // link in its place to a directory holding the very record this process wrote.
    const decoy = freshDir('decoy');
    cpSync(leaseDir, decoy, { recursive: true });
    rmSync(leaseDir, { recursive: true });
    const planted = spawnSync('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', 'ln', '-s', decoy, leaseDir], { encoding: 'utf8' });
    expect(planted.status, planted.stderr).toBe(0);

    const error = await mine.release().then(() => null, (caught: unknown) => caught);
    expect(error).toBeInstanceOf(UnsafePathError);
    expect((error as UnsafePathError).path).toBe(leaseDir);
    expect((error as Error).message).toContain(`${leaseDir} is not a plain directory but a symbolic link`);
    expect(leaseFiles(decoy)).toEqual([`${mine.gpus[0]!.uuid}.lease`]);
  });
});

describe('errors a library caller reads', () => {
  it('a lease directory that cannot be used is named, never a temporary file, and no flag is suggested', async () => {
    const libraryPath = freshSimulator();
    useScenario({ devices: [simDevice(0)] });
    const leaseDir = freshDir('leases');
    // Where the lock file belongs there is a directory: opening it fails inside the lease directory.
    mkdirSync(path.join(leaseDir, '.lock'), { recursive: true });
    const error = await selectGpus({ libraryPath, count: 1, leaseDir, sysfsRoot }).then(() => null, (caught: unknown) => caught);
    expect(error).toBeInstanceOf(FileSystemError);
    expect((error as FileSystemError).path).toBe(leaseDir);
    expect((error as FileSystemError).errno).toBe('EISDIR');
    expect((error as Error).message).toMatch(new RegExp(`^the lease directory ${leaseDir} cannot be used: cannot open the lock ${leaseDir}/\\.lock: EISDIR`));
    expect((error as Error).message).not.toMatch(/\.tmp\b|--[a-z]/);
    expect(leaseFiles(leaseDir)).toEqual([]);
  });

  it('an NVML call that never answers is told without flags; the command adds --nvml-timeout', async () => {
    const scenario = useScenario({ devices: [simDevice(0)], faults: [{ function: 'nvmlInit_v2', hang: true }] });
    const outcome = await gate({ libraryPath: freshSimulator(), mode: 'check', callTimeoutMs: 500, env: {} });
    expect(outcome.result).toBe('unavailable');
    expect(outcome.error).toMatchObject({ code: 'GPUGATE_TIMEOUT' });
    expect(outcome.reason).toMatch(/did not finish within 500 ms: nvmlInit_v2 is stuck in the driver/);
    expect(outcome.reason).not.toMatch(/--[a-z]/);
    const run = await runCli(['check', '--nvml-timeout', '500ms'], { env: cliEnv(scenario), killAfterMs: 25_000 });
    expect(run.code).toBe(69);
    expect(logText(run.stderr)).toMatch(/did not finish within 500 ms: nvmlInit_v2 is stuck in the driver.* \(--nvml-timeout\) \(exit 69/);
  });

  it('an empty selection says which option accepts it; only the command names its flags', async () => {
    const libraryPath = freshSimulator();
    const scenario = useScenario({ devices: [simDevice(0)] });
    const error = await selectGpus({ libraryPath, count: 1, gpus: [], leaseDir: freshDir('leases'), sysfsRoot }).then(() => null, (caught: unknown) => caught);
    expect(error).toBeInstanceOf(DeviceSelectionError);
    expect((error as DeviceSelectionError).emptySelection).toBe(true);
    expect((error as Error).message).toMatch(/selects no GPU: there is nothing to check.*allowEmptySelection: true/);
    expect((error as Error).message).not.toMatch(/--[a-z]/);

    const env = { CUDA_VISIBLE_DEVICES: '-1' };
    const select = await selectCommand(['--count', '1'], scenario, freshDir('leases'), env);
    expect(select.code).toBe(78);
    // select has no --allow-empty: it is not offered there.
    expect(logText(select.stderr)).toMatch(/CUDA_VISIBLE_DEVICES="-1" selects no GPU: .* \(--gpus to select GPUs\)/);
    expect(logText(select.stderr)).not.toMatch(/--allow-empty/);
    const check = await runCli(['check'], { env: cliEnv(scenario, env) });
    expect(check.code).toBe(78);
    expect(logText(check.stderr)).toMatch(/CUDA_VISIBLE_DEVICES="-1" selects no GPU: .* \(--gpus to select GPUs, or --allow-empty to accept none\)/);
  });
});
