/**
 * Leaked shared memory: /dev/shm entries that match the inference engines' naming patterns and
 * that no live process has open (fd) or mapped (maps), with their sizes and the tmpfs free space;
 * and their careful removal (regular files only, never following a symlink, re-checked first).
 * "In use" is decided by file identity (device and inode), never by comparing names: a file is
 * reached by hardlinks, bind-mount aliases of /dev/shm and deleted names alike.
 */
import { promises as fsp, type BigIntStats } from 'node:fs';
import * as path from 'node:path';
import { hiddenProcessesReason } from './proc-visibility';
import { scanOpenFiles, type OpenFiles } from './proc-open-files';
import { identityOfStat, type FileIdentity } from './procfs';
import { FileSystemError, removeEntryIfSame, UnsafePathError } from './safe-file';

/** The engines' shared-memory names (NCCL, PSM, vLLM, SGLang). */
export const DEFAULT_SHM_PATTERNS: readonly string[] = ['psm_*', 'nccl-*', 'vllm_offload_*', 'VLLM_OBJECT_STORAGE_SHM_BUFFER_*', 'sgl_shm_mm_*'];

/** One leaked /dev/shm file. */
export type ShmEntry = {
  /** shmRoot's real path joined with `name`. */
  path: string;
  /** The file name; bytes that are not UTF-8, control characters and '\\' are escaped (fileNameText). */
  name: string;
  /** Apparent size (st_size). */
  sizeBytes: number;
  /** Memory it really takes on tmpfs (st_blocks × 512). */
  allocatedBytes: number;
};

/** The /dev/shm part of a holder report. */
export interface ShmReport {
  leaked: ShmEntry[];
  tmpfsFreeBytes: number | null;
  tmpfsTotalBytes: number | null;
  /** Processes whose fds or maps could not be read: a listed entry might still be theirs. */
  uninspectablePids: number[];
  /** Whether this call read every process's open files itself (only when a file matched and none were handed in). */
  openFilesRead: boolean;
}

/** Options of findLeakedShm and cleanShm. */
export interface ShmOptions {
  /** Default /dev/shm. */
  shmRoot?: string;
  /** Default /proc. */
  procRoot?: string;
  /** Glob patterns (`*` and `?`) of names to consider; default DEFAULT_SHM_PATTERNS. */
  patterns?: readonly string[];
  /** An already taken scan of open files (saves a second /proc walk). */
  openFiles?: OpenFiles[];
  /** The pids to scan instead of every pid under procRoot (see ScanOptions.pids). */
  pids?: readonly number[];
}

/** Compiles a shell-style glob (`*`, `?`) matching a whole file name (any character, a newline included). */
export function globToRegExp(glob: string): RegExp {
  const body = glob.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.');
  return new RegExp(`^${body}$`, 's');
}

/**
 * A file name as text, reversibly: valid UTF-8 stays as it is, except that a backslash is
 * doubled and control characters are written `\xNN` (C0, DEL) or `\u{NN}` (C1); each byte that
 * is not part of valid UTF-8 is `\xNN`. Two different names never give the same text, so the
 * text names the file in reports and in cleanShm's entries, and no escape sequence reaches a
 * terminal.
 */
export function fileNameText(name: Buffer): string {
  const text = name.toString('utf8');
  const hex = (byte: number): string => `\\x${byte.toString(16).padStart(2, '0')}`;
  if (Buffer.from(text, 'utf8').equals(name)) {
    // C1 controls are characters, not bytes: `\u{85}`, never `\x85` (which is the byte 0x85).
    return text.replace(/[\\\u0000-\u001f\u007f-\u009f]/g, (c) => {
      const code = c.charCodeAt(0);
      if (c === '\\') return '\\\\';
      return code < 0x80 ? hex(code) : `\\u{${code.toString(16)}}`;
    });
  }
  // Not UTF-8: keep the valid characters, escape every other byte.
  let out = '';
  let i = 0;
  while (i < name.length) {
    const length = utf8SequenceLength(name, i);
    if (length === 0) {
      out += hex(name[i]!);
      i += 1;
    } else {
      out += fileNameText(name.subarray(i, i + length));
      i += length;
    }
  }
  return out;
}

/** The length of the valid UTF-8 sequence starting at `i`, or 0 when the byte there starts none. */
function utf8SequenceLength(bytes: Buffer, i: number): number {
  const first = bytes[i]!;
  if (first < 0x80) return 1;
  const length = first >= 0xc2 && first <= 0xdf ? 2 : first >= 0xe0 && first <= 0xef ? 3 : first >= 0xf0 && first <= 0xf4 ? 4 : 0;
  if (length === 0 || i + length > bytes.length) return 0;
  const piece = bytes.subarray(i, i + length);
  return Buffer.from(piece.toString('utf8'), 'utf8').equals(piece) ? length : 0;
}

/** Matches a glob against a name's bytes (the glob's own UTF-8 bytes, `?` being one byte). */
function matchesAny(name: Buffer, patterns: readonly string[]): boolean {
  const latin = name.toString('latin1');
  return patterns.some((pattern) => globToRegExp(Buffer.from(pattern, 'utf8').toString('latin1')).test(latin));
}

/** Every file identity some process has open or mapped. */
function referencedFiles(openFiles: OpenFiles[]): Set<FileIdentity> {
  const files = new Set<FileIdentity>();
  for (const entry of openFiles) {
    for (const identity of [...(entry.fdFiles ?? []), ...(entry.mappedFiles ?? [])]) files.add(identity);
  }
  return files;
}

function uninspectablePidsOf(openFiles: OpenFiles[]): number[] {
  return openFiles.filter((entry) => entry.fdFiles === null || entry.mappedFiles === null).map((entry) => entry.pid);
}

async function tmpfsSpace(root: string): Promise<{ free: number | null; total: number | null }> {
  try {
    const stats = await fsp.statfs(root);
    return { free: stats.bavail * stats.bsize, total: stats.blocks * stats.bsize };
  } catch {
    return { free: null, total: null };
  }
}

/** One directory entry of shmRoot: its raw name, the name as text, and its full path (bytes). */
interface ShmName {
  raw: Buffer;
  text: string;
  fullPath: Buffer;
}

async function listShmNames(realRoot: string): Promise<ShmName[]> {
  const names = await fsp.readdir(realRoot, { encoding: 'buffer' });
  return names
    .map((raw) => ({ raw, text: fileNameText(raw), fullPath: Buffer.concat([Buffer.from(`${realRoot}/`, 'utf8'), raw]) }))
    .sort((a, b) => (a.text < b.text ? -1 : a.text > b.text ? 1 : 0));
}

function scanOf(options: ShmOptions): Promise<OpenFiles[]> {
  if (options.openFiles) return Promise.resolve(options.openFiles);
  return scanOpenFiles(options.procRoot ?? '/proc', options.pids !== undefined ? { pids: options.pids } : {});
}

function identityOf(stats: BigIntStats): FileIdentity {
  return identityOfStat(stats.dev, stats.ino);
}

/**
 * Lists matching regular files in shmRoot that no process has open or mapped, and the tmpfs
 * free/total space. Symlinks and directories are never reported (lstat: never followed).
 */
export async function findLeakedShm(options: ShmOptions = {}): Promise<ShmReport> {
  const shmRoot = options.shmRoot ?? '/dev/shm';
  const patterns = options.patterns ?? DEFAULT_SHM_PATTERNS;
  const space = await tmpfsSpace(shmRoot);
  let names: ShmName[];
  let realRoot: string;
  try {
    realRoot = await fsp.realpath(shmRoot);
    names = await listShmNames(realRoot);
  } catch {
    return { leaked: [], tmpfsFreeBytes: space.free, tmpfsTotalBytes: space.total, uninspectablePids: [], openFilesRead: false };
  }
  const candidates = names.filter((name) => matchesAny(name.raw, patterns));
  if (candidates.length === 0) return { leaked: [], tmpfsFreeBytes: space.free, tmpfsTotalBytes: space.total, uninspectablePids: [], openFilesRead: false };
  const openFiles = await scanOf(options);
  const referenced = referencedFiles(openFiles);
  const leaked: ShmEntry[] = [];
  for (const name of candidates) {
    let stats: BigIntStats;
    try {
      stats = await fsp.lstat(name.fullPath, { bigint: true });
    } catch {
      continue;
    }
    if (!stats.isFile()) continue;
    if (referenced.has(identityOf(stats))) continue;
    leaked.push({ path: path.join(realRoot, name.text), name: name.text, sizeBytes: Number(stats.size), allocatedBytes: Number(stats.blocks) * 512 });
  }
  return {
    leaked,
    tmpfsFreeBytes: space.free,
    tmpfsTotalBytes: space.total,
    uninspectablePids: uninspectablePidsOf(openFiles),
    openFilesRead: options.openFiles === undefined,
  };
}

/** What cleanShm did with one file. */
export interface ShmCleanResult {
  path: string;
  sizeBytes: number | null;
  result: 'removed' | 'would-remove' | 'skipped' | 'no-permission';
  reason: string;
}

/**
 * Removes leaked shared-memory files. `target` is either entries from findLeakedShm or glob
 * patterns. Every file is re-checked just before: it must be a regular file (lstat: a symlink is
 * never followed or removed), directly in shmRoot, match a pattern, and no process may hold the
 * same file (device and inode) open or mapped, by any name; if some existing process could not
 * be inspected, nothing is removed. The file is unlinked only if the name still refers to the
 * file that was judged. `dryRun` removes nothing and reports 'would-remove'.
 */
export async function cleanShm(
  target: readonly ShmEntry[] | readonly string[],
  options: ShmOptions & { dryRun?: boolean } = {},
): Promise<ShmCleanResult[]> {
  const shmRoot = options.shmRoot ?? '/dev/shm';
  const realRoot = await fsp.realpath(shmRoot);
  const byPattern = target.length === 0 || typeof target[0] === 'string';
  const patterns = byPattern ? (target as readonly string[]) : (options.patterns ?? DEFAULT_SHM_PATTERNS);
  const names = await listShmNames(realRoot);
  // Each candidate: its shown path, and the name's bytes when it is (still) directly in shmRoot.
  let candidates: Array<{ shown: string; name: ShmName | null; outside: boolean }>;
  if (byPattern) {
    candidates = names.filter((name) => matchesAny(name.raw, patterns)).map((name) => ({ shown: path.join(realRoot, name.text), name, outside: false }));
  } else {
    candidates = (target as readonly ShmEntry[]).map((entry) => {
      const outside = path.dirname(entry.path) !== realRoot;
      const name = outside ? null : (names.find((n) => n.text === path.basename(entry.path)) ?? null);
      return { shown: entry.path, name, outside };
    });
  }
  const openFiles = await scanOf(options);
  const referenced = referencedFiles(openFiles);
  const uninspectable = uninspectablePidsOf(openFiles);
  // A process /proc does not list may hold any of these files: then nothing is proven unused.
  const hidden = await hiddenProcessesReason(options.procRoot ?? '/proc', process.pid, 'a file they hold looks unused');
  const results: ShmCleanResult[] = [];
  for (const candidate of candidates) {
    const filePath = candidate.shown;
    if (candidate.outside) {
      results.push({ path: filePath, sizeBytes: null, result: 'skipped', reason: `not directly inside ${realRoot}` });
      continue;
    }
    let stats: BigIntStats | null = null;
    if (candidate.name !== null) {
      try {
        stats = await fsp.lstat(candidate.name.fullPath, { bigint: true });
      } catch {
        stats = null;
      }
    }
    if (candidate.name === null || stats === null) {
      results.push({ path: filePath, sizeBytes: null, result: 'skipped', reason: 'no longer exists' });
      continue;
    }
    const name = candidate.name;
    const size = Number(stats.size);
    const skip = (reason: string): void => {
      results.push({ path: filePath, sizeBytes: stats.isFile() ? size : null, result: 'skipped', reason });
    };
    if (stats.isSymbolicLink()) skip('a symbolic link: never followed or removed');
    else if (!stats.isFile()) skip('not a regular file');
    else if (!matchesAny(name.raw, patterns)) skip(`name matches none of ${patterns.join(', ')}`);
    else if (referenced.has(identityOf(stats))) skip('a live process has it open or mapped');
    else if (hidden !== null) skip(`cannot prove it unused: ${hidden}`);
    else if (uninspectable.length > 0) {
      skip(`cannot prove it unused: the open files of ${uninspectable.length} process(es) are unreadable (e.g. pid ${uninspectable[0]})`);
    } else if (options.dryRun) {
      results.push({ path: filePath, sizeBytes: size, result: 'would-remove', reason: 'unowned leftover' });
    } else {
      results.push(unlinkJudged(realRoot, name, filePath, stats));
    }
  }
  return results;
}

/**
 * Unlinks the entry `name` of `root` if it still names the file judged (same device and inode,
 * still a regular file), through safe-file: the one module that removes files, which also proves
 * the directory safe at that moment.
 */
function unlinkJudged(root: string, name: ShmName, shown: string, judged: BigIntStats): ShmCleanResult {
  const size = Number(judged.size);
  try {
    if (!removeEntryIfSame(root, name.raw, { dev: judged.dev, ino: judged.ino })) {
      return { path: shown, sizeBytes: size, result: 'skipped', reason: 'replaced by another file since it was judged' };
    }
    return { path: shown, sizeBytes: size, result: 'removed', reason: 'unowned leftover' };
  } catch (error) {
    if (error instanceof FileSystemError && (error.errno === 'EACCES' || error.errno === 'EPERM')) {
      return { path: shown, sizeBytes: size, result: 'no-permission', reason: `unlink failed: ${error.errno}` };
    }
    if (error instanceof FileSystemError) return { path: shown, sizeBytes: size, result: 'skipped', reason: `unlink failed: ${error.errno}` };
    if (error instanceof UnsafePathError) return { path: shown, sizeBytes: size, result: 'skipped', reason: error.message };
    throw error;
  }
}
