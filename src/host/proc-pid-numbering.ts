/**
 * Which PID namespace a /proc numbers processes in, and a pid of gpugate's own namespace as that
 * /proc numbers it. The two differ when gpugate runs in a nested PID namespace but reads an outer
 * /proc (`unshare --pid --fork` without `--mount-proc`): NSpid in /proc/PID/status lists a
 * process's pid in the /proc's namespace first and in its own last.
 */
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import * as path from 'node:path';
import { parseNSpid, parseStat } from './procfs';

/** How far up the process tree a nested gpugate looks for a process of the /proc's own namespace. */
const MAX_ANCESTRY = 64;

function readSmall(file: string): string | null {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    return null;
  }
}

function readLink(file: string): string | null {
  try {
    return readlinkSync(file);
  } catch {
    return null;
  }
}

function nspidOf(procRoot: string, pid: string): number[] | null {
  const text = readSmall(path.join(procRoot, pid, 'status'));
  return text === null ? null : parseNSpid(text);
}

function ppidOf(procRoot: string, pid: string): number | null {
  const text = readSmall(path.join(procRoot, pid, 'stat'));
  if (text === null) return null;
  try {
    return parseStat(text).ppid;
  } catch {
    return null;
  }
}

/**
 * The PID namespace the /proc at procRoot numbers processes in. gpugate's own when its NSpid
 * has one id; else (a nested gpugate reading an outer /proc) that of its nearest ancestor that
 * /proc lists with one id. Null when it cannot be told.
 */
export function procPidNamespace(procRoot: string): string | null {
  const own = nspidOf(procRoot, 'self');
  if (own === null) return null;
  if (own.length <= 1) return readLink(path.join(procRoot, 'self', 'ns', 'pid'));
  let pid = ppidOf(procRoot, 'self');
  for (let step = 0; step < MAX_ANCESTRY && pid !== null && pid > 0; step += 1) {
    const ids = nspidOf(procRoot, String(pid));
    if (ids === null) return null;
    if (ids.length <= 1) return readLink(path.join(procRoot, String(pid), 'ns', 'pid'));
    pid = ppidOf(procRoot, String(pid));
  }
  return null;
}

/**
 * A pid of gpugate's own PID namespace as the /proc at procRoot numbers it: the same number when
 * that /proc is of gpugate's namespace; else the outermost NSpid id of the one process there
 * that is in gpugate's namespace with that pid. Null when there is no such process (or it
 * cannot be told).
 */
export function procPidOf(pid: number, procRoot: string): number | null {
  const own = nspidOf(procRoot, 'self');
  if (own === null || own.length <= 1) return pid;
  const ownNamespace = readLink(path.join(procRoot, 'self', 'ns', 'pid'));
  if (ownNamespace === null) return null;
  let names: string[];
  try {
    names = readdirSync(procRoot);
  } catch {
    return null;
  }
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    const ids = nspidOf(procRoot, name);
    if (ids === null || ids.length !== own.length || ids[ids.length - 1] !== pid) continue;
    if (readLink(path.join(procRoot, name, 'ns', 'pid')) === ownNamespace) return ids[0] ?? null;
  }
  return null;
}
