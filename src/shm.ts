/**
 * Leaked shared memory: /dev/shm entries that match the inference engines' naming patterns and
 * that no live process has open (fd) or mapped (maps), with their sizes and the tmpfs free space;
 * and their careful removal (regular files only, never following a symlink, re-checked first).
 */
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { scanOpenFiles, type OpenFiles } from './procfs';

/** The engines' shared-memory names (NCCL, PSM, vLLM, SGLang). */
export const DEFAULT_SHM_PATTERNS: readonly string[] = ['psm_*', 'nccl-*', 'vllm_offload_*', 'VLLM_OBJECT_STORAGE_SHM_BUFFER_*', 'sgl_shm_mm_*'];

/** One leaked /dev/shm file. */
export type ShmEntry = {
  path: string;
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
}

/** Compiles a shell-style glob (`*`, `?`) matching a whole file name. */
export function globToRegExp(glob: string): RegExp {
  const body = glob.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.');
  return new RegExp(`^${body}$`);
}

function matchesAny(name: string, patterns: readonly string[]): boolean {
  return patterns.some((pattern) => globToRegExp(pattern).test(name));
}

function referencedPaths(openFiles: OpenFiles[]): Set<string> {
  const paths = new Set<string>();
  for (const entry of openFiles) {
    for (const target of [...(entry.fdTargets ?? []), ...(entry.mappedPaths ?? [])]) {
      paths.add(target.endsWith(' (deleted)') ? target.slice(0, -' (deleted)'.length) : target);
    }
  }
  return paths;
}

async function tmpfsSpace(root: string): Promise<{ free: number | null; total: number | null }> {
  try {
    const stats = await fsp.statfs(root);
    return { free: stats.bavail * stats.bsize, total: stats.blocks * stats.bsize };
  } catch {
    return { free: null, total: null };
  }
}

/**
 * Lists matching regular files in shmRoot that no process has open or mapped, and the tmpfs
 * free/total space. Symlinks and directories are never reported.
 */
export async function findLeakedShm(options: ShmOptions = {}): Promise<ShmReport> {
  const shmRoot = options.shmRoot ?? '/dev/shm';
  const patterns = options.patterns ?? DEFAULT_SHM_PATTERNS;
  const space = await tmpfsSpace(shmRoot);
  let names: string[];
  let realRoot: string;
  try {
    names = await fsp.readdir(shmRoot);
    realRoot = await fsp.realpath(shmRoot);
  } catch {
    return { leaked: [], tmpfsFreeBytes: space.free, tmpfsTotalBytes: space.total, uninspectablePids: [] };
  }
  const candidates = names.filter((name) => matchesAny(name, patterns)).sort();
  if (candidates.length === 0) return { leaked: [], tmpfsFreeBytes: space.free, tmpfsTotalBytes: space.total, uninspectablePids: [] };
  const openFiles = options.openFiles ?? (await scanOpenFiles(options.procRoot ?? '/proc'));
  const referenced = referencedPaths(openFiles);
  const leaked: ShmEntry[] = [];
  for (const name of candidates) {
    const fullPath = path.join(realRoot, name);
    let stats;
    try {
      stats = await fsp.lstat(fullPath);
    } catch {
      continue;
    }
    if (!stats.isFile()) continue;
    if (referenced.has(fullPath)) continue;
    leaked.push({ path: fullPath, name, sizeBytes: stats.size, allocatedBytes: stats.blocks * 512 });
  }
  return {
    leaked,
    tmpfsFreeBytes: space.free,
    tmpfsTotalBytes: space.total,
    uninspectablePids: openFiles.filter((entry) => entry.fdTargets === null || entry.mappedPaths === null).map((entry) => entry.pid),
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
 * never followed or removed), directly in shmRoot, match a pattern, and have no process holding
 * it open or mapped; if some process could not be inspected, nothing is removed. `dryRun` removes
 * nothing and reports 'would-remove'.
 */
export async function cleanShm(
  target: readonly ShmEntry[] | readonly string[],
  options: ShmOptions & { dryRun?: boolean } = {},
): Promise<ShmCleanResult[]> {
  const shmRoot = options.shmRoot ?? '/dev/shm';
  const realRoot = await fsp.realpath(shmRoot);
  const byPattern = target.length === 0 || typeof target[0] === 'string';
  const patterns = byPattern ? (target as readonly string[]) : (options.patterns ?? DEFAULT_SHM_PATTERNS);
  let paths: string[];
  if (byPattern) {
    const names = await fsp.readdir(realRoot);
    paths = names.filter((name) => matchesAny(name, patterns)).sort().map((name) => path.join(realRoot, name));
  } else {
    paths = (target as readonly ShmEntry[]).map((entry) => entry.path);
  }
  const openFiles = options.openFiles ?? (await scanOpenFiles(options.procRoot ?? '/proc'));
  const referenced = referencedPaths(openFiles);
  const uninspectable = openFiles.filter((entry) => entry.fdTargets === null || entry.mappedPaths === null).map((entry) => entry.pid);
  const results: ShmCleanResult[] = [];
  for (const filePath of paths) {
    const name = path.basename(filePath);
    let stats;
    try {
      stats = await fsp.lstat(filePath);
    } catch {
      results.push({ path: filePath, sizeBytes: null, result: 'skipped', reason: 'no longer exists' });
      continue;
    }
    const skip = (reason: string): void => {
      results.push({ path: filePath, sizeBytes: stats.isFile() ? stats.size : null, result: 'skipped', reason });
    };
    if (path.dirname(filePath) !== realRoot) skip(`not directly inside ${realRoot}`);
    else if (stats.isSymbolicLink()) skip('a symbolic link: never followed or removed');
    else if (!stats.isFile()) skip('not a regular file');
    else if (!matchesAny(name, patterns)) skip(`name matches none of ${patterns.join(', ')}`);
    else if (referenced.has(filePath)) skip('a live process has it open or mapped');
    else if (uninspectable.length > 0) {
      skip(`cannot prove it unused: the open files of ${uninspectable.length} process(es) are unreadable (e.g. pid ${uninspectable[0]})`);
    } else if (options.dryRun) {
      results.push({ path: filePath, sizeBytes: stats.size, result: 'would-remove', reason: 'unowned leftover' });
    } else {
      try {
        await fsp.unlink(filePath);
        results.push({ path: filePath, sizeBytes: stats.size, result: 'removed', reason: 'unowned leftover' });
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code === 'EACCES' || code === 'EPERM') {
          results.push({ path: filePath, sizeBytes: stats.size, result: 'no-permission', reason: `unlink failed: ${code}` });
        } else {
          skip(`unlink failed: ${code ?? String(error)}`);
        }
      }
    }
  }
  return results;
}
