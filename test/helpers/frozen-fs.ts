/**
 * A real filesystem that can be frozen, for tests of calls stuck in the kernel: an ext4 image in
 * a temp dir, loop-mounted. While it is frozen (`fsfreeze -f`), a write() to a file on it sleeps
 * uninterruptibly (state D; SIGKILL stays pending) until it is thawed, which is what a driver
 * stuck in the kernel looks like from outside. Needs root and a loop device.
 *
 * dispose() always thaws first (so nothing stays stuck, the test runner included), then unmounts
 * (lazily when still busy), detaches every loop device backed by the image and removes the temp
 * dir; frozenFsPerTest() does it after each test, whatever the test did.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterAll, afterEach } from 'vitest';
import { makeTestTempDir } from './temp-root';

/** A mounted ext4 filesystem that can be frozen. */
export interface FrozenFs {
  /** The mount point: files written under it block while it is frozen. */
  readonly path: string;
  /** The image file the loop device serves. */
  readonly image: string;
  readonly frozen: boolean;
  /** `fsfreeze -f`: from now on a write on it sleeps in the kernel. */
  freeze(): void;
  /** `fsfreeze -u`: the writes held so far complete. */
  thaw(): void;
  /** Thaws, unmounts, detaches the loop device and removes the temp dir; throws after trying them all if one failed. */
  dispose(): void;
}

const TOOLS = ['truncate', 'mkfs.ext4', 'mount', 'umount', 'losetup', 'fsfreeze'];
const IMAGE_SIZE = '16M';

/** Runs a tool; a failure's message says what it printed on stderr (a cleanup failure reports only its first line). */
function run(program: string, args: readonly string[]): string {
  try {
    return execFileSync(program, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 30_000 });
  } catch (error) {
    const said = String((error as { stderr?: unknown }).stderr ?? '').trim().split('\n')[0] ?? '';
    throw new Error(`${program} ${args.join(' ')} failed${said === '' ? '' : `: ${said}`}`, { cause: error });
  }
}

function onPath(program: string): boolean {
  return (process.env['PATH'] ?? '').split(':').some((dir) => dir !== '' && fs.existsSync(path.join(dir, program)));
}

/** Why a frozen filesystem cannot be made here, or null when it can. */
export function frozenFsUnavailable(): string | null {
  if (process.getuid?.() !== 0) return 'needs root (mount, losetup and fsfreeze)';
  const missing = TOOLS.filter((tool) => !onPath(tool));
  if (missing.length > 0) return `needs ${missing.join(', ')} (e2fsprogs, util-linux)`;
  if (!fs.existsSync('/dev/loop-control')) return 'needs loop devices (/dev/loop-control is missing)';
  try {
    run('losetup', ['--find']);
  } catch (error) {
    return `needs a free loop device (losetup --find: ${(error as Error).message.split('\n')[0] ?? ''})`;
  }
  return null;
}

/** True while `dir` is a mount point (per /proc/self/mountinfo, whose paths escape spaces as \040). */
export function isMountPoint(dir: string): boolean {
  const escaped = dir.replace(/[ \t\n\\]/g, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, '0')}`);
  return fs
    .readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .some((line) => line.split(' ')[4] === escaped);
}

/** The loop devices backed by `image` (usually one; none once detached). */
export function loopDevicesOf(image: string): string[] {
  return run('losetup', ['--noheadings', '--output', 'NAME', '--associated', image])
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '');
}

/** How long a loop device that failed to detach gets to let go of its image by itself. */
const AUTOCLEAR_WAIT_MS = 2000;

/**
 * Detaches `device` from `image`. A `mount -o loop` device clears itself once its filesystem is
 * unmounted, and the kernel may do that just after `losetup --associated` still listed it: the
 * explicit detach then fails (the device is no longer bound), which is the outcome wanted. So a
 * failed detach counts only while the device stays associated with `image`.
 */
function detachLoopDevice(device: string, image: string): void {
  try {
    run('losetup', ['--detach', device]);
  } catch (error) {
    const deadline = Date.now() + AUTOCLEAR_WAIT_MS;
    while (Date.now() < deadline) {
      if (!loopDevicesOf(image).includes(device)) return;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50);
    }
    throw error;
  }
}

/** Creates, formats and loop-mounts a fresh ext4 image (not frozen). */
export function makeFrozenFs(): FrozenFs {
  const dir = makeTestTempDir('gpugate-frozen-fs-');
  const image = path.join(dir, 'ext4.img');
  const mountPoint = path.join(dir, 'mnt');
  let frozen = false;
  let disposed = false;

  const dispose = (): void => {
    if (disposed) return;
    disposed = true;
    const failures: string[] = [];
    const attempt = (what: string, step: () => void): void => {
      try {
        step();
      } catch (error) {
        failures.push(`${what}: ${(error as Error).message.split('\n')[0] ?? ''}`);
      }
    };
    // Thaw even when we think it is thawed: unmounting a frozen filesystem would block us in turn.
    if (isMountPoint(mountPoint)) {
      attempt('fsfreeze -u', () => {
        try {
          run('fsfreeze', ['--unfreeze', mountPoint]);
        } catch (error) {
          if (frozen) throw error; // "Invalid argument" only means it was not frozen
        }
        frozen = false;
      });
      attempt('umount', () => {
        try {
          run('umount', [mountPoint]);
        } catch {
          run('umount', ['--lazy', mountPoint]); // still busy (a writer just released): detach it now, free it later
        }
      });
    }
    attempt('losetup --detach', () => {
      for (const device of loopDevicesOf(image)) detachLoopDevice(device, image);
    });
    // Never recurse into a directory that is still a mount: that would delete (or block on) its files.
    if (isMountPoint(mountPoint)) failures.push(`${mountPoint} is still mounted; left ${dir} in place`);
    else attempt('remove the temp dir', () => fs.rmSync(dir, { recursive: true, force: true }));
    live.delete(handle);
    if (failures.length > 0) throw new Error(`frozen filesystem cleanup failed: ${failures.join('; ')}`);
  };

  const handle: FrozenFs = {
    path: mountPoint,
    image,
    get frozen() {
      return frozen;
    },
    freeze() {
      run('fsfreeze', ['--freeze', mountPoint]);
      frozen = true;
    },
    thaw() {
      run('fsfreeze', ['--unfreeze', mountPoint]);
      frozen = false;
    },
    dispose,
  };
  live.add(handle);
  try {
    run('truncate', ['--size', IMAGE_SIZE, image]);
    run('mkfs.ext4', ['-q', '-F', image]);
    fs.mkdirSync(mountPoint);
    run('mount', ['-o', 'loop', image, mountPoint]);
  } catch (error) {
    try {
      dispose();
    } catch {
      // the creation error below says what went wrong first
    }
    throw error;
  }
  return handle;
}

/** Every filesystem made and not yet disposed: a process that exits early still thaws and unmounts them. */
const live = new Set<FrozenFs>();
process.on('exit', () => {
  for (const frozenFs of [...live]) {
    try {
      frozenFs.dispose();
    } catch {
      // nothing more can be done on the way out
    }
  }
});

/**
 * For a test file: returns a maker whose filesystems are disposed after each test (and after
 * the file, should a test have made one in a hook), whether the test passed or failed.
 */
export function frozenFsPerTest(): () => FrozenFs {
  const made: FrozenFs[] = [];
  const disposeAll = (): void => {
    const errors: string[] = [];
    for (const frozenFs of made.splice(0)) {
      try {
        frozenFs.dispose();
      } catch (error) {
        errors.push((error as Error).message);
      }
    }
    if (errors.length > 0) throw new Error(errors.join('\n'));
  };
  afterEach(disposeAll);
  afterAll(disposeAll);
  return () => {
    const frozenFs = makeFrozenFs();
    made.push(frozenFs);
    return frozenFs;
  };
}
