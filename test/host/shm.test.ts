/**
 * Leaked shared memory: findLeakedShm and cleanShm on a temp directory standing in for /dev/shm,
 * with real processes holding files open or mapped.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { cleanShm, findLeakedShm, globToRegExp } from '../../src/host/shm';
import { killSpawned } from '../helpers/processes';
import { mirrorProcRoot } from '../helpers/proc-root';

const dirs: string[] = [];
const pids: number[] = [];
afterEach(async () => {
  for (const pid of pids.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
  await killSpawned();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function shmDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'gpugate-shm-'));
  dirs.push(dir);
  return dir;
}

/** A real process holding `file` open (fd) or mapped (python mmap, fd closed). */
async function holdFile(file: string, how: 'fd' | 'maps'): Promise<number> {
  const code =
    how === 'fd'
      ? `import time\nf = open(${JSON.stringify(file)}, 'rb')\nprint('ready', flush=True)\ntime.sleep(120)\n`
      : `import mmap, os, time\nfd = os.open(${JSON.stringify(file)}, os.O_RDWR)\nm = mmap.mmap(fd, 4096)\nos.close(fd)\nprint('ready', flush=True)\ntime.sleep(120)\n`;
  const child = spawn('python3', ['-c', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  pids.push(child.pid!);
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', (status) => reject(new Error(`holder exited with ${status}`)));
  });
  return child.pid!;
}

describe('findLeakedShm / cleanShm', () => {
  it('globs match whole names only', () => {
    expect(globToRegExp('nccl-*').test('nccl-123')).toBe(true);
    expect(globToRegExp('nccl-*').test('xnccl-123')).toBe(false);
    expect(globToRegExp('psm_?').test('psm_a')).toBe(true);
    expect(globToRegExp('a.b*').test('axb')).toBe(false);
  });

  it('lists unowned matching regular files with sizes; skips owned (fd or maps), unmatched, symlinks and directories', async () => {
    const dir = shmDir();
    writeFileSync(path.join(dir, 'nccl-leak'), Buffer.alloc(4096 * 3));
    writeFileSync(path.join(dir, 'VLLM_OBJECT_STORAGE_SHM_BUFFER_1'), Buffer.alloc(4096));
    writeFileSync(path.join(dir, 'psm_open'), Buffer.alloc(4096));
    writeFileSync(path.join(dir, 'vllm_offload_mapped'), Buffer.alloc(4096));
    writeFileSync(path.join(dir, 'keep-me'), Buffer.alloc(10));
    mkdirSync(path.join(dir, 'sgl_shm_mm_dir'));
    symlinkSync(path.join(dir, 'keep-me'), path.join(dir, 'nccl-symlink'));
    await holdFile(path.join(dir, 'psm_open'), 'fd');
    await holdFile(path.join(dir, 'vllm_offload_mapped'), 'maps');
    const report = await findLeakedShm({ shmRoot: dir });
    expect(report.leaked.map((e) => [e.name, e.sizeBytes])).toEqual([
      ['VLLM_OBJECT_STORAGE_SHM_BUFFER_1', 4096],
      ['nccl-leak', 4096 * 3],
    ]);
    expect(report.tmpfsFreeBytes).toBeGreaterThan(0);
  });

  it('dryRun removes nothing; a real run removes only unowned regular files and never follows a symlink', async () => {
    const dir = shmDir();
    const outside = shmDir();
    writeFileSync(path.join(outside, 'precious'), 'do not delete');
    writeFileSync(path.join(dir, 'nccl-leak'), Buffer.alloc(4096));
    writeFileSync(path.join(dir, 'psm_held'), Buffer.alloc(4096));
    symlinkSync(path.join(outside, 'precious'), path.join(dir, 'nccl-link'));
    writeFileSync(path.join(dir, 'other-file'), 'x');
    const holder = await holdFile(path.join(dir, 'psm_held'), 'fd');
    // Only this test's processes: the sandbox's PID 1 may hide its maps, which would block every removal.
    const proc = mirrorProcRoot([process.pid, holder]);
    dirs.push(proc.root);
    const procRoot = proc.root;

    const dry = await cleanShm(['nccl-*', 'psm_*'], { shmRoot: dir, procRoot, dryRun: true });
    expect(dry.map((r) => [path.basename(r.path), r.result])).toEqual([
      ['nccl-leak', 'would-remove'],
      ['nccl-link', 'skipped'],
      ['psm_held', 'skipped'],
    ]);
    expect(existsSync(path.join(dir, 'nccl-leak'))).toBe(true);

    const done = await cleanShm(['nccl-*', 'psm_*'], { shmRoot: dir, procRoot });
    expect(done.map((r) => [path.basename(r.path), r.result])).toEqual([
      ['nccl-leak', 'removed'],
      ['nccl-link', 'skipped'],
      ['psm_held', 'skipped'],
    ]);
    expect(done[1]!.reason).toMatch(/symbolic link/);
    expect(done[2]!.reason).toMatch(/open or mapped/);
    expect(existsSync(path.join(dir, 'nccl-leak'))).toBe(false);
    expect(existsSync(path.join(dir, 'psm_held'))).toBe(true);
    expect(existsSync(path.join(dir, 'other-file'))).toBe(true);
    expect(readFileSync(path.join(outside, 'precious'), 'utf8')).toBe('do not delete');
  });

  it('cleans the entries of a report, re-checking each (a file opened since is kept)', async () => {
    const dir = shmDir();
    writeFileSync(path.join(dir, 'nccl-a'), Buffer.alloc(4096));
    writeFileSync(path.join(dir, 'nccl-b'), Buffer.alloc(4096));
    const proc = mirrorProcRoot([process.pid]);
    dirs.push(proc.root);
    const report = await findLeakedShm({ shmRoot: dir, procRoot: proc.root });
    expect(report.leaked).toHaveLength(2);
    proc.add(await holdFile(path.join(dir, 'nccl-b'), 'maps'));
    const results = await cleanShm(report.leaked, { shmRoot: dir, procRoot: proc.root });
    expect(results.map((r) => [path.basename(r.path), r.result])).toEqual([
      ['nccl-a', 'removed'],
      ['nccl-b', 'skipped'],
    ]);
  });

  it('removes nothing when some process cannot be inspected', async () => {
    const dir = shmDir();
    writeFileSync(path.join(dir, 'nccl-a'), Buffer.alloc(4096));
    const results = await cleanShm(['nccl-*'], {
      shmRoot: dir,
      openFiles: [{ pid: 4242, fdTargets: null, mappedPaths: null, fdFiles: null, mappedFiles: null, error: 'cannot read /proc/4242/fd: EACCES' }],
    });
    expect(results).toEqual([{ path: path.join(dir, 'nccl-a'), sizeBytes: 4096, result: 'skipped', reason: expect.stringMatching(/cannot prove it unused/) }]);
    expect(existsSync(path.join(dir, 'nccl-a'))).toBe(true);
  });

  it('removes nothing from a directory another user may change, and removes a name that is not UTF-8 from a safe one', async () => {
    // A shm root that uid 65534 owns and may write (no sticky bit): it could swap names between
    // the judgement and the unlink, so the one module that removes files refuses it.
    const unsafe = shmDir();
    writeFileSync(path.join(unsafe, 'nccl-leak'), Buffer.alloc(4096));
    chownSync(unsafe, 65534, 65534);
    chmodSync(unsafe, 0o777);
    const proc = mirrorProcRoot([process.pid]);
    dirs.push(proc.root);
    const refused = await cleanShm(['nccl-*'], { shmRoot: unsafe, procRoot: proc.root });
    expect(refused).toEqual([{ path: path.join(unsafe, 'nccl-leak'), sizeBytes: 4096, result: 'skipped', reason: expect.stringMatching(/writable|owned/) }]);
    expect(existsSync(path.join(unsafe, 'nccl-leak'))).toBe(true);

    const safe = shmDir();
    const raw = Buffer.concat([Buffer.from(path.join(safe, 'nccl-')), Buffer.from([0xff, 0xfe])]);
    writeFileSync(raw, Buffer.alloc(4096));
    const removed = await cleanShm(['nccl-*'], { shmRoot: safe, procRoot: proc.root });
    expect(removed.map((r) => r.result)).toEqual(['removed']);
    expect(readdirSync(safe)).toEqual([]);
  });

  it('in a sticky directory others may write (as /dev/shm), a symlink and a FIFO planted by another uid are left alone and never followed or opened', async () => {
    const dir = shmDir();
    chmodSync(dir, 0o1777);
    const outside = shmDir();
    writeFileSync(path.join(outside, 'precious'), 'do not delete');
    writeFileSync(path.join(dir, 'nccl-leak'), Buffer.alloc(4096));
    // uid 65534 plants its names the way a hostile local user would.
    const asNobody = (command: string): void => {
      execFileSync('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', 'sh', '-c', command]);
    };
    asNobody(`ln -s ${JSON.stringify(path.join(outside, 'precious'))} ${JSON.stringify(path.join(dir, 'nccl-link'))} && mkfifo ${JSON.stringify(path.join(dir, 'nccl-fifo'))}`);
    const proc = mirrorProcRoot([process.pid]);
    dirs.push(proc.root);
    const results = await cleanShm(['nccl-*'], { shmRoot: dir, procRoot: proc.root });
    expect(results.map((r) => [path.basename(r.path), r.result])).toEqual([
      ['nccl-fifo', 'skipped'],
      ['nccl-leak', 'removed'],
      ['nccl-link', 'skipped'],
    ]);
    expect(readFileSync(path.join(outside, 'precious'), 'utf8')).toBe('do not delete');
    expect(readdirSync(dir).sort()).toEqual(['nccl-fifo', 'nccl-link']);
  });
});

