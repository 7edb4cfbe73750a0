/**
 * Writing a configuration file that gpugate owns, as root, next to files it does not: the file is
 * replaced atomically (a temporary file in the same directory, fsync, rename; a new file is
 * linked into place, which fails if one appeared meanwhile), and only when the file already there
 * starts with gpugate's marker line and is still, by device and inode, the file that was read.
 * Symlinks are never followed, neither for the file nor for its directory. On any doubt nothing
 * is replaced.
 */
import { randomBytes } from 'node:crypto';
import { closeSync, constants, fchmodSync, fstatSync, fsyncSync, linkSync, lstatSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import type { Stats } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { ErrorCode, GpugateError } from '../gpugate-error';

/** The file at the path is not one gpugate wrote (or changed while it was being replaced). */
export class ForeignFileError extends GpugateError {
  override readonly name = 'ForeignFileError';
  declare readonly code: typeof ErrorCode.foreignFile;
  /** The path that was left alone. */
  readonly path: string;

  constructor(path: string, message: string, options?: ErrorOptions) {
    super(ErrorCode.foreignFile, message, options);
    this.path = path;
  }
}

/** What a write did. */
export type OwnedFileOutcome = 'created' | 'replaced' | 'unchanged';

interface Identity {
  dev: number;
  ino: number;
}

function lstatOrNull(path: string): Stats | null {
  try {
    return lstatSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
}

/** Read the file at `path` without following a symlink: its identity and text, or null when there is none. */
function readExisting(path: string): { identity: Identity; text: string } | null {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return null;
    if (code === 'ELOOP') throw new ForeignFileError(path, `${path} is a symbolic link, not a file gpugate wrote: left alone`);
    throw error;
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) throw new ForeignFileError(path, `${path} is not a regular file: left alone`);
    return { identity: { dev: stat.dev, ino: stat.ino }, text: readFileSync(fd, 'utf8') };
  } finally {
    closeSync(fd);
  }
}

/** Make sure `dir` is a real directory (created with mode 0755 when missing; its parent must exist). */
function ensureDirectory(dir: string): void {
  const stat = lstatOrNull(dir);
  if (stat === null) {
    try {
      mkdirSync(dir, { mode: 0o755 });
    } catch (error) {
      const e = error as NodeJS.ErrnoException;
      if (e.code !== 'ENOENT') throw error;
      // Only the last level is created: a missing parent means a wrong root, not a folder to make.
      throw Object.assign(new Error(`cannot create ${dir}: ${dirname(dir)} does not exist`), { code: e.code, syscall: e.syscall });
    }
    return;
  }
  if (stat.isSymbolicLink() || !stat.isDirectory()) throw new ForeignFileError(dir, `${dir} is not a plain directory (a symbolic link or a file): nothing written`);
}

/**
 * Put `text` at `path`, whose first line must be `marker` (the text itself starts with it).
 * Throws ForeignFileError when a file without the marker (or a link, a directory…) is there.
 */
export function writeOwnedFile(path: string, text: string, marker: string): OwnedFileOutcome {
  if (!text.startsWith(marker)) throw new Error('writeOwnedFile: the text must start with its marker');
  const dir = dirname(path);
  ensureDirectory(dir);
  const existing = readExisting(path);
  if (existing !== null && !existing.text.startsWith(marker)) {
    throw new ForeignFileError(path, `${path} exists and was not written by gpugate (its first line is not "${marker}…"): left alone; move it away or merge the lines by hand`);
  }
  if (existing !== null && existing.text === text) return 'unchanged';
  const temporary = join(dir, `.${basename(path)}.gpugate-${process.pid}-${randomBytes(4).toString('hex')}`);
  const fd = openSync(temporary, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644);
  try {
    try {
      fchmodSync(fd, 0o644);
      const bytes = Buffer.from(text, 'utf8');
      let written = 0;
      while (written < bytes.length) written += writeSync(fd, bytes, written, bytes.length - written);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    if (existing === null) {
      // link() fails with EEXIST when a file appeared since: never clobber it.
      try {
        linkSync(temporary, path);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'EEXIST') throw new ForeignFileError(path, `${path} appeared while gpugate was writing it: left alone`);
        throw error;
      }
    } else {
      // The file must still be the one that was read: same device and inode, not a link now.
      const now = lstatOrNull(path);
      if (now === null || now.isSymbolicLink() || now.dev !== existing.identity.dev || now.ino !== existing.identity.ino) {
        throw new ForeignFileError(path, `${path} changed while gpugate was replacing it: left alone`);
      }
      renameSync(temporary, path);
    }
  } finally {
    rmSync(temporary, { force: true });
  }
  syncDirectory(dir);
  return existing === null ? 'created' : 'replaced';
}

/** fsync the directory so the rename or link itself survives a crash. */
function syncDirectory(dir: string): void {
  const fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
