/**
 * Stale handling from the command line, with real processes and real /dev/shm files:
 * --stale fail ends at once (75) on an orphaned engine worker; --kill-stale never signals a
 * holder that is not proven to be this service's leftover; --clean-shm removes only unreferenced
 * matching files, and --dry-run removes nothing.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { cliEnv, parseJsonOutput, runCli } from './helpers/cli';
import { isAlive } from './helpers/processes';
import { simDevice, writeScenario } from './helpers/sim';

const GiB = 1024 ** 3;
const orphans: number[] = [];
const shmFiles: string[] = [];

afterAll(() => {
  for (const pid of orphans) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
  for (const file of shmFiles) rmSync(file, { force: true });
});

/** A real reparented process titled like a vLLM worker. */
function startOrphan(title: string): number {
  const started = spawnSync('bash', ['-c', `exec -a ${title} sleep 60 </dev/null >/dev/null 2>&1 & echo $!`], { encoding: 'utf8' });
  const pid = Number(started.stdout.trim());
  orphans.push(pid);
  // The background subshell may not have exec'd yet: wait until the title is in place.
  for (let i = 0; i < 200; i += 1) {
    let cmdline = '';
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    } catch {
      // not there yet
    }
    if (cmdline.startsWith(`${title}\0`)) break;
    spawnSync('sleep', ['0.025']);
  }
  return pid;
}

function heldBy(pid: number): string {
  return writeScenario({
    devices: [simDevice(0, { memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: 40 * GiB }, processes: [{ pid, usedBytes: 40 * GiB, kinds: ['compute'] }] })],
  });
}

describe('stale handling', () => {
  it('--stale fail exits 75 at once on an orphaned engine worker, naming it', async () => {
    const pid = startOrphan('VLLM::Worker_TP2');
    const run = await runCli(['wait', '--stale', 'fail', '--timeout', '60s', '--json'], { env: cliEnv(heldBy(pid)) });
    expect(run.code).toBe(75);
    expect(run.elapsedMs).toBeLessThan(30_000);
    const json = parseJsonOutput(run);
    expect(json.result).toBe('stale');
    expect(String(json.reason)).toContain(`pid ${pid} (orphan`);
    expect(json.stale).toMatchObject({ holders: [expect.objectContaining({ pid, class: 'orphan', name: 'VLLM::Worker_TP2' })] });
  });

  it('--stale ignore skips the /proc scan: no stale finding is logged', async () => {
    const pid = startOrphan('VLLM::Worker_TP4');
    const run = await runCli(['check', '--stale', 'ignore', '--json'], { env: cliEnv(heldBy(pid)) });
    expect(run.code).toBe(75);
    expect(run.stderr).not.toContain('stale gpu=');
  });

  it('--kill-stale does not signal an orphan that is not proven to be a leftover of this service', async () => {
    const pid = startOrphan('VLLM::Worker_TP5');
    const run = await runCli(['check', '--kill-stale', '--kill-grace', '1s', '--json'], { env: cliEnv(heldBy(pid)) });
    expect(run.code).toBe(75);
    const json = parseJsonOutput(run);
    const signals = (json.actions as { signals: Array<{ pid: number; result: string; signal: string | null }> }).signals;
    expect(signals).toContainEqual(expect.objectContaining({ pid, result: 'skipped', signal: null }));
    expect(isAlive(pid)).toBe(true);
  });
});

/** Whether every process's open files and mappings can be read here (else cleanShm must refuse to remove anything). */
function everyProcessInspectable(): boolean {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      readdirSync(`/proc/${entry}/fd`);
      readFileSync(`/proc/${entry}/maps`);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') return false;
    }
  }
  return true;
}

describe('--clean-shm', () => {
  it('removes an unreferenced matching /dev/shm file (or refuses when it cannot prove that), and --dry-run only says it would', async () => {
    const name = `nccl-gpugate-cli-test-${process.pid}`;
    const file = `/dev/shm/${name}`;
    shmFiles.push(file);
    writeFileSync(file, Buffer.alloc(64 * 1024, 1));
    const idle = writeScenario({ devices: [simDevice(0)] });
    const provable = everyProcessInspectable();

    const dry = await runCli(['check', '--clean-shm', name, '--dry-run', '--json'], { env: cliEnv(idle) });
    expect(dry.code).toBe(0);
    expect(existsSync(file)).toBe(true);
    const dryResult = provable ? { path: file, result: 'would-remove' } : { path: file, result: 'skipped', reason: expect.stringContaining('cannot prove it unused') };
    expect((parseJsonOutput(dry).actions as { shm: unknown[] }).shm).toEqual([expect.objectContaining(dryResult)]);

    const real = await runCli(['check', '--clean-shm', name, '--json'], { env: cliEnv(idle) });
    expect(real.code).toBe(0);
    expect(existsSync(file)).toBe(!provable);
    const realResult = provable ? { path: file, result: 'removed' } : { path: file, result: 'skipped' };
    expect((parseJsonOutput(real).actions as { shm: unknown[] }).shm).toEqual([expect.objectContaining(realResult)]);
  });

  it('lists an unreferenced engine file as leaked shm with its size', async () => {
    const name = `nccl-gpugate-cli-leak-${process.pid}`;
    const file = `/dev/shm/${name}`;
    shmFiles.push(file);
    writeFileSync(file, Buffer.alloc(128 * 1024, 1));
    const run = await runCli(['holders', '--json'], { env: cliEnv(writeScenario({ devices: [simDevice(0)] })) });
    expect(run.code).toBe(0);
    const shm = (parseJsonOutput(run).stale as { shm: { leaked: Array<{ path: string; sizeBytes: number }>; tmpfsFreeBytes: number | null } }).shm;
    if (everyProcessInspectable()) expect(shm.leaked).toContainEqual(expect.objectContaining({ path: file, sizeBytes: 128 * 1024 }));
    expect(shm.tmpfsFreeBytes).toBeGreaterThan(0);
  });

  it('rejects a glob with a slash (exit 64): only names inside /dev/shm', async () => {
    const run = await runCli(['check', '--clean-shm', '../etc/*'], { env: cliEnv(writeScenario({ devices: [simDevice(0)] })) });
    expect(run.code).toBe(64);
    expect(run.stderr).toContain('no slashes');
  });
});
