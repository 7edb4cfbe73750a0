/**
 * Reading one unit file or drop-in as systemd would, without letting the file stall or swamp
 * gpugate: the path is looked at first (a FIFO, socket, directory or device is never opened:
 * opening a FIFO blocks, opening some devices acts), then opened non-blocking and checked again
 * on the open descriptor (the same inode, still a regular file), and read up to a cap.
 *
 * systemd reads a link to a character device (/dev/null, but also /dev/zero) as an empty, masked
 * file; so does this module, without opening the device. A FIFO is refused: systemd itself would
 * block on it (systemd-analyze verify does).
 */
import { closeSync, constants, fstatSync, openSync, readSync, statSync, type Stats } from 'node:fs';
import { ConfigError } from '../config-error';

/** The most bytes one unit file or drop-in may hold; a larger one is refused (no unit needs a mebibyte of settings). */
export const UNIT_FILE_MAX_BYTES = 4 * 1024 * 1024;

/** What one path of a unit holds. */
export type UnitFileContent =
  | { kind: 'text'; text: string }
  /** A link to a character device: systemd treats the file as empty and the unit (or drop-in) as masked. */
  | { kind: 'device'; rdev: number }
  /** A directory (a drop-in directory lists it when it is named like a drop-in): no settings. */
  | { kind: 'directory' }
  /** A dangling link: systemd skips it. */
  | { kind: 'missing' };

/** A file type in words, for messages. */
export function fileTypeName(stat: Stats): string {
  if (stat.isFIFO()) return 'a FIFO';
  if (stat.isSocket()) return 'a socket';
  if (stat.isDirectory()) return 'a directory';
  if (stat.isBlockDevice()) return 'a block device';
  if (stat.isCharacterDevice()) return 'a character device';
  if (stat.isSymbolicLink()) return 'a symbolic link';
  return 'not a regular file';
}

/**
 * The content of `path` (links followed, as systemd follows them). Throws ConfigError (naming the
 * path) for anything systemd cannot load as settings: a FIFO, socket, directory or block device,
 * a file above UNIT_FILE_MAX_BYTES, or one that changed between the look and the open.
 */
export function readUnitFileContent(path: string): UnitFileContent {
  let before: Stats;
  try {
    before = statSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'missing' };
    throw error;
  }
  if (before.isCharacterDevice()) return { kind: 'device', rdev: before.rdev };
  if (before.isDirectory()) return { kind: 'directory' };
  if (before.isFIFO()) throw new ConfigError('unit', `${path} is a FIFO, not a regular file: systemd would block reading it (remove it)`);
  if (!before.isFile()) throw new ConfigError('unit', `${path} is ${fileTypeName(before)}, not a regular file: systemd cannot load settings from it`);
  if (before.size > UNIT_FILE_MAX_BYTES) throw tooLarge(path, before.size);
  // O_NONBLOCK: should the path become a FIFO after the look, the open still returns at once.
  const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  try {
    const after = fstatSync(fd);
    if (!after.isFile() || after.dev !== before.dev || after.ino !== before.ino) {
      throw new ConfigError('unit', `${path} changed while it was being read (now ${after.isFile() ? 'another file' : fileTypeName(after)}): read it again`);
    }
    return { kind: 'text', text: readCapped(fd, path) };
  } finally {
    closeSync(fd);
  }
}

/** Read to the end, failing once more than the cap has come (the file may grow after fstat). */
function readCapped(fd: number, path: string): string {
  const buffer = Buffer.allocUnsafe(UNIT_FILE_MAX_BYTES + 1);
  let length = 0;
  for (;;) {
    const got = readSync(fd, buffer, length, buffer.length - length, null);
    if (got === 0) break;
    length += got;
    if (length > UNIT_FILE_MAX_BYTES) throw tooLarge(path, length);
  }
  return buffer.toString('utf8', 0, length);
}

function tooLarge(path: string, size: number): ConfigError {
  return new ConfigError('unit', `${path} holds ${size} bytes, more than the ${UNIT_FILE_MAX_BYTES} bytes (${UNIT_FILE_MAX_BYTES / 1024 / 1024} MiB) gpugate reads from one unit file: not a unit file gpugate can judge`);
}
