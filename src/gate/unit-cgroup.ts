/**
 * The caller's systemd unit cgroup: which cgroup path is a unit, whether a path lies in it, and
 * which processes are its members.
 */
import { promises as fsp, type Dirent } from 'node:fs';
import * as path from 'node:path';
import { listPids, readProcess } from '../host/procfs';

/**
 * Decides the caller's unit cgroup from its cgroup path: a path ending in a systemd `.service`
 * (not the per-user manager `user@N.service`) is a unit; a login session (`session-N.scope`), the
 * user manager, or the root ('/', as in a container) is not.
 */
export function unitCgroupFromPath(cgroupPath: string | null): string | null {
  if (cgroupPath === null || cgroupPath === '/' || cgroupPath === '') return null;
  const parts = cgroupPath.split('/').filter((p) => p !== '');
  // Under Delegate=yes systemd runs ExecStartPre= etc. in `<unit>/.control` and the service may
  // make its own sub-cgroups: the unit is the last `.service` with only such groups below it.
  let unitAt = parts.length - 1;
  while (unitAt >= 0 && !parts[unitAt]!.endsWith('.service')) {
    if (/\.(slice|scope)$/.test(parts[unitAt]!)) return null;
    unitAt -= 1;
  }
  if (unitAt < 0) return null;
  if (/^user@\d+\.service$/.test(parts[unitAt]!)) return null;
  return `/${parts.slice(0, unitAt + 1).join('/')}`;
}

/** True when a cgroup path is `unit` or below it. */
export function inCgroup(cgroupPath: string | null, unit: string): boolean {
  return cgroupPath !== null && (cgroupPath === unit || cgroupPath.startsWith(`${unit}/`));
}

async function cgroupProcs(dir: string): Promise<number[] | null> {
  let text: string;
  try {
    text = await fsp.readFile(path.join(dir, 'cgroup.procs'), 'utf8');
  } catch {
    return null;
  }
  const pids = text.split('\n').filter((line) => /^\d+$/.test(line.trim())).map(Number);
  let entries: Dirent[] = [];
  try {
    entries = await fsp.readdir(dir, { withFileTypes: true });
  } catch {
    // No sub-cgroups readable.
  }
  for (const entry of entries) {
    if (!entry.isDirectory()) continue;
    const sub = await cgroupProcs(path.join(dir, entry.name));
    if (sub) pids.push(...sub);
  }
  return pids;
}

/**
 * The pids in `unitCgroup` and below: from cgroup.procs under cgroupRoot (unified, or systemd's
 * v1 tree), else by reading every /proc/PID/cgroup under procRoot.
 */
export async function unitCgroupMembers(unitCgroup: string, procRoot = '/proc', cgroupRoot = '/sys/fs/cgroup'): Promise<number[]> {
  for (const base of [cgroupRoot, path.join(cgroupRoot, 'systemd'), path.join(cgroupRoot, 'unified')]) {
    const pids = await cgroupProcs(path.join(base, unitCgroup));
    if (pids) return [...new Set(pids)].sort((a, b) => a - b);
  }
  const members: number[] = [];
  for (const pid of await listPids(procRoot).catch(() => [] as number[])) {
    const info = await readProcess(pid, procRoot);
    if (info.kind === 'ok' && info.cgroup !== null && (info.cgroup === unitCgroup || info.cgroup.startsWith(`${unitCgroup}/`))) members.push(pid);
  }
  return members;
}
