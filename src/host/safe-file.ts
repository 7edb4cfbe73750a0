/**
 * The one way gpugate creates, replaces, opens for writing or removes a file, or takes a lock.
 * gpugate runs as root next to directories other users may write (a node_exporter textfile
 * directory, /tmp), so every path it writes through is proved safe at the moment of the action:
 *
 * - every directory level, from `/` down, is a plain directory (never a symbolic link), owned by
 *   root or by gpugate's own uid, and not writable by group or others unless it is sticky (as
 *   /tmp is, where others may add names but not rename or remove gpugate's);
 * - a new file is a temporary file with a random name opened `O_CREAT|O_EXCL|O_NOFOLLOW`, written,
 *   synced, then renamed (replace) or linked (create, never clobbering) into place;
 * - a file opened where one may already be (the lock, an in-place report) is opened
 *   `O_NOFOLLOW|O_NONBLOCK` (a FIFO cannot block the open) and proved by `fstat` to be a regular
 *   file with one link, owned by a trusted uid, before a byte is written;
 * - a file is removed only while its name still refers to the inode that was judged.
 *
 * On any doubt nothing is written: UnsafePathError (exit 77) names the path and what is wrong; an
 * OS failure is a FileSystemError naming the errno (exit 71; 77 for EACCES/EPERM).
 */
import { randomBytes } from 'node:crypto';
import { closeSync, constants, fchmodSync, fstatSync, fsyncSync, ftruncateSync, linkSync, lstatSync, mkdirSync, openSync, readSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import type { BigIntStats } from 'node:fs';
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ErrorCode, GpugateError } from '../gpugate-error';
import { loadBinding } from '../nvml/binding';

/** A path gpugate refuses to write through: a symbolic link, a directory others may change, a file that is not a plain one of a trusted owner. */
export class UnsafePathError extends GpugateError {
  override readonly name = 'UnsafePathError';
  declare readonly code: typeof ErrorCode.unsafePath;
  /** The file or directory found unsafe. */
  readonly path: string;

  constructor(filePath: string, message: string, options?: ErrorOptions) {
    super(ErrorCode.unsafePath, message, options);
    this.path = filePath;
  }
}

/** The OS failed a file operation: `errno` names why (ENOSPC, EROFS, EIO…); EACCES and EPERM carry their own code. */
export class FileSystemError extends GpugateError {
  override readonly name = 'FileSystemError';
  declare readonly code: typeof ErrorCode.fileSystem | typeof ErrorCode.fileAccess;
  /** The file or directory involved. */
  readonly path: string;
  /** The errno name. */
  readonly errno: string;
  /** The system call that failed. */
  readonly syscall: string;

  constructor(filePath: string, errno: string, syscall: string, message: string, options?: ErrorOptions) {
    super(errno === 'EACCES' || errno === 'EPERM' ? ErrorCode.fileAccess : ErrorCode.fileSystem, message, options);
    this.path = filePath;
    this.errno = errno;
    this.syscall = syscall;
  }
}

/** A file as the kernel knows it: device and inode. */
export interface FileIdentity {
  dev: bigint;
  ino: bigint;
}

/** Which missing directory levels gpugate may create (mode 0755): none, only the last, or all. */
export type MissingDirectories = 'refuse' | 'create-last' | 'create-all';

const TEMPORARY_ATTEMPTS = 8;
const LOCK_RETRY_MS = 5;

function euid(): number {
  return process.geteuid?.() ?? 0;
}

function errnoOf(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  return typeof code === 'string' ? code : 'EIO';
}

/** A FileSystemError for `error`, thrown by `syscall` while doing `what` to `filePath`. */
function osFailure(error: unknown, filePath: string, what: string): FileSystemError {
  const e = error as NodeJS.ErrnoException;
  const errno = errnoOf(error);
  // Node's message is "ENOSPC: no space left on device, write …": keep the words.
  const words = /^[A-Z0-9]+: ([^,]+)/.exec(e.message ?? '')?.[1];
  const who = euid();
  const advice = (errno === 'EACCES' || errno === 'EPERM') && who !== 0 ? ` (gpugate runs as uid ${who}, not root)` : '';
  return new FileSystemError(filePath, errno, e.syscall ?? 'unknown', `cannot ${what} ${filePath}: ${errno}${words === undefined ? '' : ` (${words})`}${advice}`, { cause: error });
}

function trustedOwners(): string {
  const who = euid();
  return who === 0 ? 'root' : `root or uid ${who}`;
}

function isTrustedOwner(uid: bigint): boolean {
  return uid === 0n || uid === BigInt(euid());
}

/** Why `dir` may not hold files gpugate writes, or null when it may. */
function directoryProblem(dir: string, stat: BigIntStats): string | null {
  if (stat.isSymbolicLink()) return `${dir} is not a plain directory but a symbolic link (gpugate follows no symbolic link on a path it writes: give the path it points to)`;
  if (!isTrustedOwner(stat.uid)) return `${dir} is owned by uid ${stat.uid}: gpugate writes only below directories owned by ${trustedOwners()}`;
  const mode = Number(stat.mode);
  if ((mode & 0o022) !== 0 && (mode & 0o1000) === 0) {
    return `${dir} is writable by ${(mode & 0o002) !== 0 ? 'every user' : 'its group'} (mode ${(mode & 0o7777).toString(8).padStart(4, '0')}) and not sticky: another user could swap what gpugate writes there`;
  }
  return null;
}

/** Why a file gpugate opened to write into is unsafe, or null. */
function openedFileProblem(file: string, stat: BigIntStats): string | null {
  if (stat.isFIFO()) return `${file} is a FIFO, not a regular file`;
  if (!stat.isFile()) return `${file} is not a regular file`;
  if (!isTrustedOwner(stat.uid)) return `${file} is owned by uid ${stat.uid}, not by ${trustedOwners()}`;
  if (stat.nlink !== 1n) return `${file} has ${stat.nlink} hard links (it may be another file under a second name)`;
  return null;
}

/** fstat of an open descriptor; its failure is an OS error about `file`. */
function fstatOf(fd: number, file: string): BigIntStats {
  try {
    return fstatSync(fd, { bigint: true });
  } catch (error) {
    throw osFailure(error, file, 'inspect');
  }
}

function lstatOrNull(filePath: string): BigIntStats | null {
  try {
    return lstatSync(filePath, { bigint: true });
  } catch (error) {
    if (errnoOf(error) === 'ENOENT') return null;
    throw osFailure(error, filePath, 'inspect');
  }
}

/**
 * Prove every level of the directory `dir` safe to write below, creating missing levels as
 * `missing` allows (mode 0755); `label` says what the directory is, in messages. Throws
 * UnsafePathError, or FileSystemError (ENOENT for a level that is missing and may not be created,
 * ENOTDIR for a level that is a file).
 */
export function prepareDirectory(dir: string, missing: MissingDirectories = 'refuse', label = 'the directory'): void {
  const absolute = path.resolve(dir);
  const levels: string[] = [];
  for (let level = absolute; ; level = path.dirname(level)) {
    levels.unshift(level);
    if (path.dirname(level) === level) break;
  }
  levels.forEach((level, index) => {
    let stat = lstatOrNull(level);
    if (stat === null) {
      const mayCreate = missing === 'create-all' || (missing === 'create-last' && index === levels.length - 1);
      if (!mayCreate) {
        const mustExist = missing === 'create-last' ? path.dirname(absolute) : absolute;
        throw new FileSystemError(level, 'ENOENT', 'lstat', `cannot write in ${absolute}: ${mustExist} does not exist`);
      }
      try {
        mkdirSync(level, { mode: 0o755 });
      } catch (error) {
        // Another process made it meanwhile: judged below like any other.
        if (errnoOf(error) !== 'EEXIST') throw osFailure(error, level, `create ${label}`);
      }
      stat = lstatOrNull(level);
      if (stat === null) throw new FileSystemError(level, 'ENOENT', 'lstat', `${level} vanished just after gpugate created it`);
    }
    if (!stat.isDirectory() && !stat.isSymbolicLink()) {
      throw new FileSystemError(level, 'ENOTDIR', 'lstat', `cannot ${missing === 'refuse' ? 'write in' : `create ${label}`} ${absolute}: ENOTDIR (${level} is not a directory)`);
    }
    const problem = directoryProblem(level, stat);
    if (problem !== null) throw new UnsafePathError(level, problem);
  });
}

function writeAll(fd: number, data: Buffer, file: string): void {
  let written = 0;
  try {
    while (written < data.length) written += writeSync(fd, data, written, data.length - written);
    fsyncSync(fd);
  } catch (error) {
    throw osFailure(error, file, 'write');
  }
}

/** A new file with a random name next to `file`, holding `data` with `mode`, synced; returns its path. */
function writeTemporary(file: string, data: Buffer, mode: number): string {
  const dir = path.dirname(file);
  const stem = path.basename(file).slice(0, 100);
  for (let attempt = 0; attempt < TEMPORARY_ATTEMPTS; attempt += 1) {
    const temporary = path.join(dir, `.${stem}.gpugate-${randomBytes(8).toString('hex')}.tmp`);
    let fd: number;
    try {
      fd = openSync(temporary, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW | constants.O_NONBLOCK, mode);
    } catch (error) {
      if (errnoOf(error) === 'EEXIST') continue; // someone planted that name: draw another
      // The random name means nothing to the reader: the file being written is what failed.
      throw osFailure(error, file, 'create');
    }
    try {
      try {
        fchmodSync(fd, mode); // the umask must not decide who may read it
      } catch (error) {
        throw osFailure(error, file, 'set the mode of');
      }
      writeAll(fd, data, file);
    } catch (error) {
      closeSync(fd);
      removeQuietly(temporary);
      throw error;
    }
    closeSync(fd);
    return temporary;
  }
  throw new UnsafePathError(dir, `${TEMPORARY_ATTEMPTS} random temporary names in ${dir} were all taken: another process is planting names there`);
}

function removeQuietly(filePath: string): void {
  try {
    unlinkSync(filePath);
  } catch {
    // Already gone: nothing to clean.
  }
}

/** fsync the directory, so a rename or link in it survives a crash. */
function syncDirectory(dir: string): void {
  let fd: number;
  try {
    fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  } catch (error) {
    throw osFailure(error, dir, 'open the directory');
  }
  try {
    fsyncSync(fd);
  } catch (error) {
    throw osFailure(error, dir, 'sync the directory');
  } finally {
    closeSync(fd);
  }
}

function toBuffer(data: string | Buffer): Buffer {
  return typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
}

/** Options of the writers. */
export interface WriteOptions {
  /** The file's permission bits (umask does not apply). */
  mode: number;
  /** Which missing directory levels may be created; default: none. */
  directories?: MissingDirectories;
}

/**
 * Put a new file holding `data` at `file`, never replacing one: false (and nothing written) when
 * a name `file` exists already.
 */
export function createFile(file: string, data: string | Buffer, options: WriteOptions): boolean {
  const target = path.resolve(file);
  prepareDirectory(path.dirname(target), options.directories);
  const temporary = writeTemporary(target, toBuffer(data), options.mode);
  try {
    linkSync(temporary, target);
  } catch (error) {
    if (errnoOf(error) === 'EEXIST') return false;
    throw osFailure(error, target, 'create');
  } finally {
    removeQuietly(temporary);
  }
  syncDirectory(path.dirname(target));
  return true;
}

/**
 * Replace whatever is at `file` (the name, never what a link there points to) by a file holding
 * `data`, atomically. With `replacing`, only while the name still refers to that inode: false
 * (nothing replaced) when it changed.
 */
export function replaceFile(file: string, data: string | Buffer, options: WriteOptions & { replacing?: FileIdentity }): boolean {
  const target = path.resolve(file);
  prepareDirectory(path.dirname(target), options.directories);
  const temporary = writeTemporary(target, toBuffer(data), options.mode);
  try {
    if (options.replacing !== undefined) {
      const now = lstatOrNull(target);
      if (now === null || !now.isFile() || now.dev !== options.replacing.dev || now.ino !== options.replacing.ino) return false;
    }
    try {
      renameSync(temporary, target);
    } catch (error) {
      throw osFailure(error, target, 'replace');
    }
  } finally {
    removeQuietly(temporary);
  }
  syncDirectory(path.dirname(target));
  return true;
}

/**
 * Write `data` into the file at `file` itself, created when missing: for a file that must keep its
 * inode (Kubernetes bind-mounts /dev/termination-log). The open follows no link and cannot block
 * on a FIFO; what it opened must be a regular file with one link owned by a trusted uid.
 */
export function writeFileInPlace(file: string, data: string | Buffer, options: WriteOptions): void {
  const target = path.resolve(file);
  prepareDirectory(path.dirname(target), options.directories);
  // Named before the open, which some kernels refuse with EACCES (protected_symlinks) instead of ELOOP.
  const before = lstatOrNull(target);
  if (before !== null && before.isSymbolicLink()) throw new UnsafePathError(target, `${target} is a symbolic link: gpugate follows none on a path it writes`);
  if (before !== null && !before.isFile()) throw new UnsafePathError(target, `${target} is ${before.isFIFO() ? 'a FIFO' : 'not a regular file'}`);
  let fd: number;
  try {
    fd = openSync(target, constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK, options.mode);
  } catch (error) {
    const errno = errnoOf(error);
    if (errno === 'ELOOP') throw new UnsafePathError(target, `${target} is a symbolic link: gpugate follows none on a path it writes`);
    // O_NONBLOCK on a FIFO without a reader.
    if (errno === 'ENXIO') throw new UnsafePathError(target, `${target} is a FIFO or a device, not a regular file`);
    throw osFailure(error, target, 'open');
  }
  try {
    const problem = openedFileProblem(target, fstatOf(fd, target));
    if (problem !== null) throw new UnsafePathError(target, problem);
    try {
      ftruncateSync(fd, 0);
    } catch (error) {
      throw osFailure(error, target, 'truncate');
    }
    writeAll(fd, toBuffer(data), target);
  } finally {
    closeSync(fd);
  }
}

/** What {@link readRegularFile} found. */
export interface ReadFile {
  identity: FileIdentity;
  text: string;
}

/**
 * Read the regular file at `file` (at most `maxBytes`) without following a link or blocking on a
 * FIFO; null when there is none. Throws UnsafePathError for a link or anything not a regular file.
 */
export function readRegularFile(file: string, maxBytes: number): ReadFile | null {
  const target = path.resolve(file);
  let fd: number;
  try {
    fd = openSync(target, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    const errno = errnoOf(error);
    if (errno === 'ENOENT') return null;
    if (errno === 'ELOOP') throw new UnsafePathError(target, `${target} is a symbolic link`);
    throw osFailure(error, target, 'read');
  }
  try {
    const stat = fstatOf(fd, target);
    if (!stat.isFile()) throw new UnsafePathError(target, `${target} is not a regular file`);
    if (stat.size > BigInt(maxBytes)) throw new UnsafePathError(target, `${target} is larger than ${maxBytes} bytes`);
    const buffer = Buffer.alloc(Number(stat.size) + 1);
    let length = 0;
    try {
      for (let n = 1; n > 0 && length < buffer.length; length += n) n = readSync(fd, buffer, length, buffer.length - length, length);
    } catch (error) {
      throw osFailure(error, target, 'read');
    }
    return { identity: { dev: stat.dev, ino: stat.ino }, text: buffer.subarray(0, Math.min(length, maxBytes)).toString('utf8') };
  } finally {
    closeSync(fd);
  }
}

/** Remove `file` only while its name still refers to the regular file `identity`; true when removed (or already gone). */
export function removeFileIfSame(file: string, identity: FileIdentity): boolean {
  const target = path.resolve(file);
  return removeEntryIfSame(path.dirname(target), Buffer.from(path.basename(target)), identity);
}

/** removeFileIfSame for the entry `name` of `dir`, as raw bytes (a /dev/shm name need not be UTF-8); false: it names another file now. */
export function removeEntryIfSame(dir: string, name: Buffer, identity: FileIdentity): boolean {
  if (name.length === 0 || name.includes(0x2f) || name.includes(0) || /^\.\.?$/.test(name.toString('latin1'))) {
    throw new UnsafePathError(dir, `refusing to remove ${JSON.stringify(name.toString('latin1'))} from ${dir}: not a plain name in that directory`);
  }
  const directory = path.resolve(dir);
  prepareDirectory(directory);
  const target = Buffer.concat([Buffer.from(directory === '/' ? '/' : `${directory}/`), name]);
  let step = 'inspect';
  try {
    const current = lstatSync(target, { bigint: true });
    if (!current.isFile() || current.dev !== identity.dev || current.ino !== identity.ino) return false;
    step = 'remove';
    unlinkSync(target);
    return true;
  } catch (error) {
    if (errnoOf(error) === 'ENOENT') return true;
    throw osFailure(error, target.toString('utf8'), step);
  }
}

/**
 * Open the lock file `file` (created when missing), private to gpugate's uid: mode 0600, so no
 * other user can open it, and so hold its lock. A lock file others could open (one from an older
 * gpugate, mode 0644) is replaced by a private one: a descriptor opened on the old one locks
 * nothing anymore.
 */
function openPrivateLockFile(file: string): number {
  for (let attempt = 0; attempt < TEMPORARY_ATTEMPTS; attempt += 1) {
    let fd: number;
    try {
      fd = openSync(file, constants.O_RDWR | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    } catch (error) {
      const errno = errnoOf(error);
      if (errno === 'ENOENT') {
        createFile(file, '', { mode: 0o600 });
        continue;
      }
      if (errno === 'ELOOP') throw new UnsafePathError(file, `the lock ${file} is a symbolic link`);
      if (errno === 'ENXIO') throw new UnsafePathError(file, `the lock ${file} is a FIFO or a device, not a regular file`);
      throw osFailure(error, file, 'open the lock');
    }
    let stat: BigIntStats;
    try {
      stat = fstatOf(fd, file);
    } catch (error) {
      closeSync(fd);
      throw error;
    }
    const problem = openedFileProblem(file, stat);
    if (problem !== null || stat.uid !== BigInt(euid())) {
      closeSync(fd);
      throw new UnsafePathError(file, problem ?? `the lock ${file} is owned by uid ${stat.uid}, not by gpugate's uid ${euid()}: another user could hold it`);
    }
    if ((Number(stat.mode) & 0o077) !== 0) {
      closeSync(fd);
      replaceFile(file, '', { mode: 0o600 });
      continue;
    }
    return fd;
  }
  throw new UnsafePathError(file, `the lock ${file} kept changing while gpugate opened it`);
}

/** Whether the name `file` still refers to the file open as `fd`. */
function stillNamed(file: string, fd: number): boolean {
  const named = lstatOrNull(file);
  const open = fstatOf(fd, file);
  return named !== null && named.dev === open.dev && named.ino === open.ino;
}

/** A held lock; `release()` closes its descriptor, which drops it (the kernel does the same when the process dies). */
export interface FileLock {
  release(): void;
}

/** Options of {@link lockFile}. */
export interface LockOptions {
  /** Give up (null) after this long. */
  timeoutMs: number;
  /** Which missing levels of the lock's directory may be created; default: none. */
  directories?: MissingDirectories;
  /** What the lock's directory is, in messages. */
  directoryLabel?: string;
}

/**
 * Take the exclusive flock of the private lock file `file`, retrying without blocking until
 * `timeoutMs` has passed: the lock, or null on timeout. Its directory is proved safe first
 * (created as `directories` allows).
 */
export async function lockFile(file: string, options: LockOptions): Promise<FileLock | null> {
  const { timeoutMs } = options;
  const target = path.resolve(file);
  prepareDirectory(path.dirname(target), options.directories, options.directoryLabel);
  const binding = loadBinding();
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const fd = openPrivateLockFile(target);
    let locked: boolean;
    try {
      locked = binding.flockExclusive(fd);
    } catch (error) {
      closeSync(fd);
      throw osFailure(error, target, 'lock');
    }
    try {
      // A lock on a file that was replaced meanwhile (an old lock file) excludes nobody: start over.
      if (locked && stillNamed(target, fd)) return { release: () => closeSync(fd) };
    } catch (error) {
      closeSync(fd);
      throw error;
    }
    closeSync(fd);
    if (performance.now() >= deadline) return null;
    await sleep(LOCK_RETRY_MS);
  }
}
