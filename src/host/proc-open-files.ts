/**
 * Which files each process has open or mapped, read from /proc/PID/fd and /proc/PID/maps (the
 * `fuser` view), by path and by file identity. Like procfs.ts, readers take the procfs root as an
 * argument and report "no such process" and "unreadable" as values, never as exceptions.
 */
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import {
  failureOf,
  identityOfStat,
  listPids,
  parseMaps,
  parseMapsIdentities,
  parseStat,
  readDirNames,
  readProcText,
  type FileIdentity,
  type ReadFailure,
} from './procfs';

/** What /proc/PID/fd holds: each descriptor's link text and the identity of the file behind it. */
export interface FdFiles {
  kind: 'ok';
  targets: string[];
  identities: FileIdentity[];
}

/**
 * Reads /proc/PID/fd: every descriptor's link text, and the identity of the open file, taken by
 * stat THROUGH the link (which reaches the open file itself, whatever name it was opened by or
 * whether that name still exists). A descriptor closed meanwhile is skipped; sockets, pipes and
 * anonymous inodes (link texts not starting with '/') are not files that a name can reach.
 */
export async function readFdFiles(pid: number, procRoot = '/proc'): Promise<FdFiles | ReadFailure> {
  const dir = path.join(procRoot, String(pid), 'fd');
  const listing = await readDirNames(dir);
  if (listing.kind !== 'ok') return listing;
  const names = listing.names;
  const targets: string[] = [];
  const identities: FileIdentity[] = [];
  // A descriptor closed between readdir and reading its link is gone; any other failure means
  // this process's files cannot be known.
  let failure: ReadFailure | null = null;
  const closedOrFailed = (error: unknown, link: string): void => {
    const why = failureOf(error, link);
    if (why.kind === 'unreadable') failure ??= why;
  };
  await Promise.all(
    names.map(async (name) => {
      const link = path.join(dir, name);
      let target: string;
      try {
        target = await fsp.readlink(link);
      } catch (error) {
        closedOrFailed(error, link);
        return;
      }
      targets.push(target);
      if (!target.startsWith('/')) return;
      try {
        const stats = await fsp.stat(link, { bigint: true });
        identities.push(identityOfStat(stats.dev, stats.ino));
      } catch (error) {
        closedOrFailed(error, link);
      }
    }),
  );
  if (failure !== null) {
    // The whole process vanished meanwhile, or it exists and hides its descriptors.
    return (await processExists(pid, procRoot)) ? failure : { kind: 'missing' };
  }
  return { kind: 'ok', targets, identities };
}

async function processExists(pid: number, procRoot: string): Promise<boolean> {
  try {
    await fsp.lstat(path.join(procRoot, String(pid), 'stat'));
    return true;
  } catch {
    return false;
  }
}

/** Reads /proc/PID/maps: mapped paths (as written there) and the identities of the mapped files. */
export async function readMappedFiles(pid: number, procRoot = '/proc'): Promise<{ kind: 'ok'; paths: string[]; identities: FileIdentity[] } | ReadFailure> {
  const file = path.join(procRoot, String(pid), 'maps');
  const text = await readProcText(file);
  if (text.kind !== 'ok') return text;
  return { kind: 'ok', paths: parseMaps(text.text), identities: parseMapsIdentities(text.text) };
}


/**
 * For a zombie thread-group leader, the files of its first other thread that can still be read
 * (threads share descriptors and memory); null when the leader is not a zombie or none is left.
 */
async function readLiveThreadFiles(
  pid: number,
  procRoot: string,
): Promise<[Awaited<ReturnType<typeof readFdFiles>>, Awaited<ReturnType<typeof readMappedFiles>>] | null> {
  const stat = await readProcText(path.join(procRoot, String(pid), 'stat'));
  if (stat.kind !== 'ok') return null;
  let state: string;
  try {
    state = parseStat(stat.text).state;
  } catch {
    return null;
  }
  if (state !== 'Z') return null;
  const taskRoot = path.join(procRoot, String(pid), 'task');
  let tids: string[];
  try {
    tids = (await fsp.readdir(taskRoot)).filter((name) => /^\d+$/.test(name) && name !== String(pid));
  } catch {
    return null;
  }
  for (const tid of tids) {
    const reads = await Promise.all([readFdFiles(Number(tid), taskRoot), readMappedFiles(Number(tid), taskRoot)]);
    if (reads[0].kind !== 'missing' && reads[1].kind !== 'missing') return reads;
  }
  return null;
}

/** What one process has open or mapped (either may be null when unreadable). */
export interface OpenFiles {
  pid: number;
  /** Link texts of /proc/PID/fd/*. */
  fdTargets: string[] | null;
  /** Paths of /proc/PID/maps, as written there. */
  mappedPaths: string[] | null;
  /** Identities of the files its descriptors refer to. */
  fdFiles: FileIdentity[] | null;
  /** Identities of the files it maps. */
  mappedFiles: FileIdentity[] | null;
  /** Why fdTargets or mappedPaths is null. */
  error: string | null;
}

/** Options of scanOpenFiles. */
export interface ScanOptions {
  /**
   * The pids to read instead of listing procRoot. Lets a test hand in a pid that has exited
   * between the listing and the reading, the race every scan of a busy host meets.
   */
  pids?: readonly number[];
}

/**
 * Reads fd targets and mapped files of every visible process under procRoot (the `fuser` view).
 * A process that vanishes while it is read (any of its files answers "no such process") has
 * exited and holds nothing: it is left out. Only a process that exists and cannot be read is
 * returned with nulls (and then blocks any conclusion that a file is unused).
 */
export async function scanOpenFiles(procRoot = '/proc', options: ScanOptions = {}): Promise<OpenFiles[]> {
  const pids = options.pids !== undefined ? [...options.pids] : await listPids(procRoot);
  const results: OpenFiles[] = [];
  // Bounded parallelism: a host may have thousands of processes.
  const batch = 32;
  for (let i = 0; i < pids.length; i += batch) {
    const slice = pids.slice(i, i + batch);
    const part = await Promise.all(
      slice.map(async (pid): Promise<OpenFiles | null> => {
        let [fds, maps] = await Promise.all([readFdFiles(pid, procRoot), readMappedFiles(pid, procRoot)]);
        if (fds.kind === 'ok' && maps.kind === 'ok' && fds.targets.length === 0 && maps.paths.length === 0 && maps.identities.length === 0) {
          // Nothing at all: a kernel thread, or a leader that exited while its other threads run on
          // (they share its files and memory, which /proc/PID no longer shows): ask a live thread.
          const threads = await readLiveThreadFiles(pid, procRoot);
          if (threads !== null) [fds, maps] = threads;
        }
        if (fds.kind === 'missing' || maps.kind === 'missing') return null;
        const errors = [fds, maps].filter((r): r is { kind: 'unreadable'; reason: string } => r.kind === 'unreadable').map((r) => r.reason);
        return {
          pid,
          fdTargets: fds.kind === 'ok' ? fds.targets : null,
          mappedPaths: maps.kind === 'ok' ? maps.paths : null,
          fdFiles: fds.kind === 'ok' ? fds.identities : null,
          mappedFiles: maps.kind === 'ok' ? maps.identities : null,
          error: errors.length > 0 ? errors.join('; ') : null,
        };
      }),
    );
    for (const entry of part) if (entry) results.push(entry);
  }
  return results;
}
