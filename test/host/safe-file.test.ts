/**
 * src/host/safe-file.ts in process, on real files, links and flocks: what a lock does while
 * another descriptor holds it, how an older shareable lock file is replaced, what a writer does
 * with a name that is already there, and which directories it creates or refuses. (The attacks by
 * another uid, through the command, are in test/host/root-file-writes.test.ts.)
 */
import { chmodSync, chownSync, linkSync, lstatSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/gpugate-error';
import { createFile, FileSystemError, lockFile, prepareDirectory, readRegularFile, removeFileIfSame, replaceFile, UnsafePathError, writeFileInPlace } from '../../src/host/safe-file';
import { thrownBy } from '../helpers/thrown-by';
import { makeTestTempDir } from '../helpers/temp-root';

const work = makeTestTempDir('gpugate-safe-file-');
afterAll(() => rmSync(work, { recursive: true, force: true }));

let dirs = 0;
function freshDir(): string {
  dirs += 1;
  const dir = path.join(work, `case-${dirs}`);
  mkdirSync(dir, { mode: 0o755 });
  return dir;
}

describe('lockFile', () => {
  it('is exclusive between two descriptors of one process, and free again once released', async () => {
    const lockPath = path.join(freshDir(), '.lock');
    const first = await lockFile(lockPath, { timeoutMs: 0 });
    expect(first).not.toBeNull();
    expect(await lockFile(lockPath, { timeoutMs: 50 })).toBeNull();
    first?.release();
    const second = await lockFile(lockPath, { timeoutMs: 0 });
    expect(second).not.toBeNull();
    second?.release();
    expect(statSync(lockPath).mode & 0o7777).toBe(0o600);
  });

  it('replaces a lock file others could open (0644) by a private one, and the lock then excludes', async () => {
    const dir = freshDir();
    const lockPath = path.join(dir, '.lock');
    writeFileSync(lockPath, '');
    chmodSync(lockPath, 0o644);
    const oldInode = statSync(lockPath).ino;
    const lock = await lockFile(lockPath, { timeoutMs: 0 });
    expect(lock).not.toBeNull();
    expect(statSync(lockPath).ino).not.toBe(oldInode);
    expect(statSync(lockPath).mode & 0o7777).toBe(0o600);
    expect(await lockFile(lockPath, { timeoutMs: 20 })).toBeNull();
    lock?.release();
    expect(readdirSync(dir)).toEqual(['.lock']);
  });

  it('refuses a lock file of another owner and a hard-linked one, naming the path', async () => {
    const theirs = path.join(freshDir(), '.lock');
    writeFileSync(theirs, '', { mode: 0o600 });
    chownSync(theirs, 65534, 65534);
    const refused = await lockFile(theirs, { timeoutMs: 0 }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(UnsafePathError);
    expect((refused as Error).message).toBe(`${theirs} is owned by uid 65534, not by root`);

    const linked = path.join(freshDir(), '.lock');
    writeFileSync(linked, '', { mode: 0o600 });
    linkSync(linked, `${linked}.second-name`);
    const twice = await lockFile(linked, { timeoutMs: 0 }).catch((error: unknown) => error);
    expect(twice).toBeInstanceOf(UnsafePathError);
    expect((twice as Error).message).toContain('has 2 hard links');
  });
});

describe('writers', () => {
  it('createFile never replaces a name that is there, a dangling link included, and leaves no temporary file', () => {
    const dir = freshDir();
    const target = path.join(dir, 'lease');
    symlinkSync(path.join(dir, 'would-be-created'), target);
    expect(createFile(target, 'x\n', { mode: 0o644 })).toBe(false);
    expect(lstatSync(target).isSymbolicLink()).toBe(true);
    expect(readdirSync(dir)).toEqual(['lease']);
    rmSync(target);
    expect(createFile(target, 'x\n', { mode: 0o640 })).toBe(true);
    expect(statSync(target).mode & 0o7777).toBe(0o640);
    expect(readFileSync(target, 'utf8')).toBe('x\n');
  });

  it('replaceFile with an identity replaces only that inode', () => {
    const dir = freshDir();
    const target = path.join(dir, 'file');
    writeFileSync(target, 'one\n');
    const read = readRegularFile(target, 100);
    expect(read?.text).toBe('one\n');
    // Kept under another name, so the new file cannot reuse its inode number.
    renameSync(target, path.join(dir, 'aside'));
    writeFileSync(target, 'another\n');
    expect(replaceFile(target, 'two\n', { mode: 0o644, replacing: read!.identity })).toBe(false);
    expect(readFileSync(target, 'utf8')).toBe('another\n');
    expect(replaceFile(target, 'two\n', { mode: 0o644, replacing: readRegularFile(target, 100)!.identity })).toBe(true);
    expect(readFileSync(target, 'utf8')).toBe('two\n');
    expect(readdirSync(dir).sort()).toEqual(['aside', 'file']);
  });

  it('writeFileInPlace keeps the inode and refuses a file with a second name', () => {
    const dir = freshDir();
    const target = path.join(dir, 'report');
    writeFileSync(target, 'a much longer earlier line\n');
    const inode = statSync(target).ino;
    writeFileInPlace(target, 'short\n', { mode: 0o644 });
    expect(readFileSync(target, 'utf8')).toBe('short\n');
    expect(statSync(target).ino).toBe(inode);
    linkSync(target, path.join(dir, 'second-name'));
    expect(thrownBy(() => writeFileInPlace(target, 'x\n', { mode: 0o644 }), UnsafePathError).message).toBe(`${target} has 2 hard links (it may be another file under a second name)`);
    expect(readFileSync(target, 'utf8')).toBe('short\n');
  });

  it('removeFileIfSame removes only the inode that was judged', () => {
    const dir = freshDir();
    const target = path.join(dir, 'stale');
    writeFileSync(target, 'old\n');
    const judged = readRegularFile(target, 100)!.identity;
    renameSync(target, path.join(dir, 'aside'));
    writeFileSync(target, 'new\n');
    expect(removeFileIfSame(target, judged)).toBe(false);
    expect(readFileSync(target, 'utf8')).toBe('new\n');
    expect(removeFileIfSame(target, readRegularFile(target, 100)!.identity)).toBe(true);
    expect(readdirSync(dir)).toEqual(['aside']);
  });
});

describe('prepareDirectory', () => {
  it('creates the missing levels it may (0755), and names the directory that must exist otherwise', () => {
    const dir = freshDir();
    prepareDirectory(path.join(dir, 'a', 'b'), 'create-all');
    expect(statSync(path.join(dir, 'a', 'b')).isDirectory()).toBe(true);
    const refused = thrownBy(() => prepareDirectory(path.join(dir, 'x', 'y'), 'create-last'), FileSystemError);
    expect(refused).toMatchObject({ code: ErrorCode.fileSystem, errno: 'ENOENT', message: `cannot write in ${path.join(dir, 'x', 'y')}: ${path.join(dir, 'x')} does not exist` });
    expect(readdirSync(dir)).toEqual(['a']);
  });

  it('refuses a group-writable directory without the sticky bit, and accepts it sticky', () => {
    const dir = freshDir();
    chmodSync(dir, 0o775);
    expect(thrownBy(() => prepareDirectory(dir), UnsafePathError)).toMatchObject({ code: ErrorCode.unsafePath, message: `${dir} is writable by its group (mode 0775) and not sticky: another user could swap what gpugate writes there` });
    chmodSync(dir, 0o1775);
    expect(() => prepareDirectory(dir)).not.toThrow();
  });
});
