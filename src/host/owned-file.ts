/**
 * Writing a configuration file that gpugate owns, as root, next to files it does not: the file is
 * replaced (through src/host/safe-file.ts: every directory level proved safe, a random temporary
 * file, rename; a new file is linked into place, which fails if one appeared meanwhile) only when
 * the file already there starts with gpugate's marker line and is still, by device and inode, the
 * file that was read. On any doubt nothing is replaced.
 */
import * as path from 'node:path';
import { ErrorCode, GpugateError } from '../gpugate-error';
import { createFile, prepareDirectory, readRegularFile, replaceFile, UnsafePathError, type ReadFile } from './safe-file';

/** The file at the path is not one gpugate wrote (or changed while it was being replaced). */
export class ForeignFileError extends GpugateError {
  override readonly name = 'ForeignFileError';
  declare readonly code: typeof ErrorCode.foreignFile;
  /** The path that was left alone. */
  readonly path: string;

  constructor(filePath: string, message: string, options?: ErrorOptions) {
    super(ErrorCode.foreignFile, message, options);
    this.path = filePath;
  }
}

/** What a write did. */
export type OwnedFileOutcome = 'created' | 'replaced' | 'unchanged';

/** A file gpugate owns is small: anything larger is not one. */
const OWNED_FILE_MAX_BYTES = 1 << 20;
const MODE = 0o644;

/** The file at `file`, or null when there is none; a link or anything not a regular file is foreign. */
function readExisting(file: string): ReadFile | null {
  try {
    return readRegularFile(file, OWNED_FILE_MAX_BYTES);
  } catch (error) {
    if (!(error instanceof UnsafePathError)) throw error;
    const what = /symbolic link/.test(error.message) ? 'a symbolic link' : 'not a regular file';
    throw new ForeignFileError(file, `${file} is ${what}, not a file gpugate wrote: left alone`, { cause: error });
  }
}

/**
 * Put `text` at `path`, whose first line must be `marker` (the text itself starts with it). Only
 * the last directory level is created when missing. Throws ForeignFileError when a file without
 * the marker (or a link, a directory…) is there, UnsafePathError or FileSystemError (safe-file.ts)
 * when the directories cannot be written safely.
 */
export function writeOwnedFile(filePath: string, text: string, marker: string): OwnedFileOutcome {
  if (!text.startsWith(marker)) throw new Error('writeOwnedFile: the text must start with its marker');
  const target = path.resolve(filePath);
  // A missing parent means a wrong root, not a folder to make.
  prepareDirectory(path.dirname(target), 'create-last');
  const existing = readExisting(target);
  if (existing !== null && !existing.text.startsWith(marker)) {
    throw new ForeignFileError(target, `${target} exists and was not written by gpugate (its first line is not "${marker}…"): left alone; move it away or merge the lines by hand`);
  }
  if (existing !== null && existing.text === text) return 'unchanged';
  if (existing === null) {
    if (!createFile(target, text, { mode: MODE })) throw new ForeignFileError(target, `${target} appeared while gpugate was writing it: left alone`);
    return 'created';
  }
  if (!replaceFile(target, text, { mode: MODE, replacing: existing.identity })) {
    throw new ForeignFileError(target, `${target} changed while gpugate was replacing it: left alone`);
  }
  return 'replaced';
}
