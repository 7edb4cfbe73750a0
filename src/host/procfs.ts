/**
 * Readers and parsers of Linux procfs: /proc/PID/stat, status, cgroup, comm, cmdline, fd, maps,
 * task, /proc/stat (boot time) and mountinfo. Parsers are pure functions of the file text; readers
 * take the procfs root as an argument so tests can point them at prepared directories, and report
 * "no such process" and "unreadable" as values, never as exceptions. Which files every process
 * has open or mapped, by identity, is read in proc-open-files.ts.
 */
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';

/** The fields of /proc/PID/stat that gpugate uses. */
export interface ProcStat {
  pid: number;
  /** The command name between the parentheses (may itself contain spaces and parentheses). */
  comm: string;
  /** One letter: R, S, D, Z, T, t, X, I, … */
  state: string;
  ppid: number;
  /** Field 5: the process group. */
  pgrp: number;
  /** Field 9, the kernel's per-task flags (PF_EXITING is 0x4). */
  flags: number;
  /** Field 20. */
  numThreads: number;
  /** Field 22: start time in clock ticks after boot. */
  startTimeTicks: number;
}

/** PF_EXITING: the task is in its exit path. */
export const PF_EXITING = 0x4;
/** PF_KTHREAD in field 9: a thread of the kernel's, which no process can set on itself. */
export const PF_KTHREAD = 0x200000;

/** Clock ticks per second assumed for /proc start times (USER_HZ is 100 on every Linux ABI gpugate supports). */
export const CLOCK_TICKS_PER_SECOND = 100;

function statError(text: string, what: string): Error {
  return new Error(`malformed /proc stat line ${JSON.stringify(text.slice(0, 120))}: ${what}`);
}

/**
 * Parses the text of /proc/PID/stat. The command name may contain spaces and parentheses, so it
 * is split at the first '(' and the LAST ')'. Throws an Error naming the text when malformed.
 */
export function parseStat(text: string): ProcStat {
  const open = text.indexOf('(');
  const close = text.lastIndexOf(')');
  if (open < 0 || close < open) throw statError(text, 'expected "PID (comm) state …"');
  const pid = Number(text.slice(0, open).trim());
  if (!Number.isSafeInteger(pid) || pid < 0 || text.slice(0, open).trim() === '') throw statError(text, 'expected a pid before "("');
  const comm = text.slice(open + 1, close);
  const rest = text.slice(close + 1).trim().split(/\s+/);
  // rest[k] is field k + 3 (field 3 is the state).
  if (rest.length < 20) throw statError(text, `expected at least 22 fields, found ${rest.length + 2}`);
  const numberAt = (k: number, name: string): number => {
    const value = Number(rest[k]);
    if (!Number.isFinite(value)) throw statError(text, `field ${k + 3} (${name}) is not a number`);
    return value;
  };
  const state = rest[0]!;
  if (!/^[A-Za-z]$/.test(state)) throw statError(text, 'field 3 (state) is not a state letter');
  return {
    pid,
    comm,
    state,
    ppid: numberAt(1, 'ppid'),
    pgrp: numberAt(2, 'pgrp'),
    flags: numberAt(6, 'flags'),
    numThreads: numberAt(17, 'num_threads'),
    startTimeTicks: numberAt(19, 'starttime'),
  };
}

/** Parses /proc/PID/status into a map of field name to (trimmed) value. */
export function parseStatus(text: string): Map<string, string> {
  const fields = new Map<string, string>();
  for (const line of text.split('\n')) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    fields.set(line.slice(0, colon), line.slice(colon + 1).trim());
  }
  return fields;
}

/** The NSpid ids of a status text (outermost namespace first); more than one means a nested PID namespace. Empty when absent. */
export function parseNSpid(statusText: string): number[] {
  const value = parseStatus(statusText).get('NSpid');
  if (value === undefined || value === '') return [];
  return value.split(/\s+/).map(Number).filter((n) => Number.isSafeInteger(n));
}

/** One line of /proc/PID/cgroup. */
export interface CgroupEntry {
  hierarchyId: number;
  /** Controllers (empty for the unified hierarchy; ['name=systemd'] for systemd's v1 tree). */
  controllers: string[];
  path: string;
}

/** Parses /proc/PID/cgroup (`hierarchy:controllers:path` per line; the path may contain ':'). */
export function parseCgroup(text: string): CgroupEntry[] {
  const entries: CgroupEntry[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    const first = line.indexOf(':');
    const second = first < 0 ? -1 : line.indexOf(':', first + 1);
    if (first < 0 || second < 0) continue;
    const hierarchyId = Number(line.slice(0, first));
    if (!Number.isSafeInteger(hierarchyId)) continue;
    const controllerText = line.slice(first + 1, second);
    entries.push({ hierarchyId, controllers: controllerText === '' ? [] : controllerText.split(','), path: line.slice(second + 1) });
  }
  return entries;
}

/**
 * The cgroup path that names the systemd unit: the unified (v2) path unless it is the root, else
 * systemd's v1 `name=systemd` path, else the root. Null when there are no entries.
 */
export function systemdCgroupPath(entries: CgroupEntry[]): string | null {
  const unified = entries.find((e) => e.hierarchyId === 0 && e.controllers.length === 0);
  const named = entries.find((e) => e.controllers.includes('name=systemd'));
  if (unified && unified.path !== '/') return unified.path;
  if (named) return named.path;
  return unified ? unified.path : null;
}

/** The systemd unit a cgroup path belongs to: its last `.service` or `.scope` component, or null. */
export function unitOfCgroup(cgroupPath: string | null): string | null {
  if (cgroupPath === null) return null;
  const parts = cgroupPath.split('/').filter((p) => p !== '');
  for (let i = parts.length - 1; i >= 0; i -= 1) {
    const part = parts[i]!;
    if (part.endsWith('.service') || part.endsWith('.scope')) return part;
  }
  return null;
}

/** Unique path names of the file-backed mappings in /proc/PID/maps (a " (deleted)" suffix is kept). */
export function parseMaps(text: string): string[] {
  const paths = new Set<string>();
  for (const line of text.split('\n')) {
    // address perms offset dev inode pathname — the path starts after the 5th field.
    const match = /^\S+\s+\S+\s+\S+\s+\S+\s+\d+\s+(.*)$/.exec(line);
    if (!match) continue;
    const name = match[1]!.trim();
    if (name.startsWith('/')) paths.add(name);
  }
  return [...paths];
}

/**
 * The identity of a file: its device (major and minor numbers) and inode. Two names (a hardlink,
 * a bind-mount alias, a deleted name) of one file have the same identity; a path string does not.
 * Written as `major:minor:inode` in decimal, the key used to compare identities.
 */
export type FileIdentity = string;

/** The identity of a file from its device number (st_dev, Linux's encoding) and inode (st_ino). */
export function identityOfStat(dev: bigint, ino: bigint): FileIdentity {
  // Linux new_encode_dev: minor in bits 0-7 and 20-39, major in bits 8-19 and 40-63.
  const major = ((dev >> 8n) & 0xfffn) | ((dev >> 32n) & ~0xfffn);
  const minor = (dev & 0xffn) | ((dev >> 12n) & ~0xffn);
  return `${major}:${minor}:${ino}`;
}

/**
 * Identities of the file-backed mappings in /proc/PID/maps, from the device (`major:minor` in
 * hex) and inode columns, so a mapped file is recognised whatever its name (a name with a
 * newline is written `\012`, a removed one gets " (deleted)"). Anonymous mappings (inode 0) are
 * not files.
 */
export function parseMapsIdentities(text: string): FileIdentity[] {
  const identities = new Set<FileIdentity>();
  for (const line of text.split('\n')) {
    const match = /^\S+\s+\S+\s+\S+\s+([0-9a-fA-F]+):([0-9a-fA-F]+)\s+(\d+)(?:\s|$)/.exec(line);
    if (!match || match[3] === '0') continue;
    identities.add(`${BigInt(`0x${match[1]!}`)}:${BigInt(`0x${match[2]!}`)}:${BigInt(match[3]!)}`);
  }
  return [...identities];
}

/** One line of /proc/PID/mountinfo. */
export interface MountInfoEntry {
  mountId: number;
  parentId: number;
  root: string;
  mountPoint: string;
  mountOptions: string[];
  fsType: string;
  source: string;
  superOptions: string[];
}

function unescapeMount(text: string): string {
  return text.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

/** Parses /proc/PID/mountinfo (optional fields end at the ' - ' separator; octal escapes decoded). */
export function parseMountinfo(text: string): MountInfoEntry[] {
  const entries: MountInfoEntry[] = [];
  for (const line of text.split('\n')) {
    const separator = line.indexOf(' - ');
    if (separator < 0) continue;
    const left = line.slice(0, separator).split(' ');
    const right = line.slice(separator + 3).split(' ');
    if (left.length < 6 || right.length < 3) continue;
    entries.push({
      mountId: Number(left[0]),
      parentId: Number(left[1]),
      root: unescapeMount(left[3]!),
      mountPoint: unescapeMount(left[4]!),
      mountOptions: left[5]!.split(','),
      fsType: right[0]!,
      source: unescapeMount(right[1]!),
      superOptions: right[2]!.split(','),
    });
  }
  return entries;
}

/** The boot time in seconds since the epoch (`btime` of /proc/stat), or null when absent. */
export function parseBootTime(procStatText: string): number | null {
  const match = /^btime\s+(\d+)\s*$/m.exec(procStatText);
  return match ? Number(match[1]) : null;
}

/** A process's start time in epoch milliseconds from its stat start ticks and the boot time (ms). */
export function startTimeMsOf(stat: ProcStat, bootTimeMs: number): number {
  return Math.round(bootTimeMs + (stat.startTimeTicks * 1000) / CLOCK_TICKS_PER_SECOND);
}

/** The boot time in epoch milliseconds read from procRoot/stat, or null when unreadable. */
export async function readBootTimeMs(procRoot = '/proc'): Promise<number | null> {
  const text = await readProcText(path.join(procRoot, 'stat'));
  const seconds = text.kind === 'ok' ? parseBootTime(text.text) : null;
  return seconds === null ? null : seconds * 1000;
}

/** One variable of a NUL-separated /proc/PID/environ text (the environment the process was exec'd with), or null. */
export function environValue(raw: string, name: string): string | null {
  const prefix = `${name}=`;
  for (const entry of raw.split('\0')) if (entry.startsWith(prefix)) return entry.slice(prefix.length);
  return null;
}

/** The pids in a /proc/PID/task/TID/children file (space-separated; empty when there are none). */
export function parseChildren(text: string): number[] {
  return text.split(' ').filter((word) => /^\d+$/.test(word)).map(Number);
}

/** The arguments of a NUL-separated /proc/PID/cmdline, each whole (empty for kernel threads and zombies). */
export function parseArgv(raw: string): string[] {
  const parts = raw.split('\0');
  while (parts.length > 0 && parts[parts.length - 1] === '') parts.pop();
  return parts;
}

/** Parses a NUL-separated /proc/PID/cmdline into one space-joined string (null when empty, as for kernel threads and zombies). */
export function parseCmdline(raw: string): string | null {
  const parts = parseArgv(raw);
  return parts.length === 0 ? null : parts.join(' ');
}

/** Why reading a /proc entry failed, as a value. */
export type ReadFailure = { kind: 'missing' } | { kind: 'unreadable'; reason: string };

/** A failed read of `file` as a value: "no such process" when it is gone, else why it was unreadable. */
export function failureOf(error: unknown, file: string): ReadFailure {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'ENOENT' || code === 'ESRCH') return { kind: 'missing' };
  return { kind: 'unreadable', reason: `cannot read ${file}: ${code ?? String(error)}` };
}

/** Reads a text file, returning the failure as a value. */
export async function readProcText(file: string): Promise<{ kind: 'ok'; text: string } | ReadFailure> {
  try {
    return { kind: 'ok', text: await fsp.readFile(file, 'utf8') };
  } catch (error) {
    return failureOf(error, file);
  }
}

/** What gpugate knows about one process after reading its /proc entry. */
export interface ProcessInfo {
  kind: 'ok';
  pid: number;
  stat: ProcStat;
  comm: string;
  cmdline: string | null;
  /** The arguments of /proc/PID/cmdline, each whole; null when it is empty or unreadable. */
  argv: string[] | null;
  /** The systemd-relevant cgroup path, or null when unreadable. */
  cgroup: string | null;
  /** Parsed status fields, or null when unreadable. */
  status: Map<string, string> | null;
}

/** Reads /proc/PID/{stat,comm,cmdline,cgroup,status} under procRoot. Only stat is required. */
export async function readProcess(pid: number, procRoot = '/proc'): Promise<ProcessInfo | ReadFailure> {
  const dir = path.join(procRoot, String(pid));
  const stat = await readProcText(path.join(dir, 'stat'));
  if (stat.kind !== 'ok') return stat;
  let parsed: ProcStat;
  try {
    parsed = parseStat(stat.text);
  } catch (error) {
    return { kind: 'unreadable', reason: `${path.join(dir, 'stat')}: ${(error as Error).message}` };
  }
  const [comm, cmdline, cgroup, status] = await Promise.all([
    readProcText(path.join(dir, 'comm')),
    readProcText(path.join(dir, 'cmdline')),
    readProcText(path.join(dir, 'cgroup')),
    readProcText(path.join(dir, 'status')),
  ]);
  const argv = cmdline.kind === 'ok' ? parseArgv(cmdline.text) : null;
  return {
    kind: 'ok',
    pid,
    stat: parsed,
    comm: comm.kind === 'ok' ? comm.text.replace(/\n$/, '') : parsed.comm,
    cmdline: cmdline.kind === 'ok' ? parseCmdline(cmdline.text) : null,
    argv: argv !== null && argv.length > 0 ? argv : null,
    cgroup: cgroup.kind === 'ok' ? systemdCgroupPath(parseCgroup(cgroup.text)) : null,
    status: status.kind === 'ok' ? parseStatus(status.text) : null,
  };
}

/** The entries of a /proc directory, or why they cannot be listed. */
export async function readDirNames(dir: string): Promise<{ kind: 'ok'; names: string[] } | ReadFailure> {
  try {
    return { kind: 'ok', names: await fsp.readdir(dir) };
  } catch (error) {
    return failureOf(error, dir);
  }
}

/** Reads the targets of /proc/PID/fd/* (symlink texts). */
export async function readFdTargets(pid: number, procRoot = '/proc'): Promise<{ kind: 'ok'; targets: string[] } | ReadFailure> {
  const dir = path.join(procRoot, String(pid), 'fd');
  const listing = await readDirNames(dir);
  if (listing.kind !== 'ok') return listing;
  const names = listing.names;
  const targets: string[] = [];
  await Promise.all(
    names.map(async (name) => {
      try {
        targets.push(await fsp.readlink(path.join(dir, name)));
      } catch {
        // The descriptor closed between readdir and readlink.
      }
    }),
  );
  return { kind: 'ok', targets };
}

/**
 * The target of /proc/PID/exe: the path of the executable the process runs, which only exec
 * changes (the kernel appends " (deleted)" once that file is removed). Kernel threads have none.
 */
export async function readExecutable(pid: number, procRoot = '/proc'): Promise<{ kind: 'ok'; path: string } | ReadFailure> {
  const link = path.join(procRoot, String(pid), 'exe');
  try {
    return { kind: 'ok', path: await fsp.readlink(link) };
  } catch (error) {
    return failureOf(error, link);
  }
}

/** Reads the mapped file paths of /proc/PID/maps. */
export async function readMappedPaths(pid: number, procRoot = '/proc'): Promise<{ kind: 'ok'; paths: string[] } | ReadFailure> {
  const file = path.join(procRoot, String(pid), 'maps');
  const text = await readProcText(file);
  if (text.kind !== 'ok') return text;
  return { kind: 'ok', paths: parseMaps(text.text) };
}

/** The states of the threads in /proc/PID/task other than the leader, or a failure. */
export async function readOtherThreadStates(pid: number, procRoot = '/proc'): Promise<{ kind: 'ok'; states: string[] } | ReadFailure> {
  const dir = path.join(procRoot, String(pid), 'task');
  const listing = await readDirNames(dir);
  if (listing.kind !== 'ok') return listing;
  const names = listing.names;
  const states: string[] = [];
  for (const name of names) {
    if (name === String(pid) || !/^\d+$/.test(name)) continue;
    const text = await readProcText(path.join(dir, name, 'stat'));
    if (text.kind !== 'ok') continue;
    try {
      states.push(parseStat(text.text).state);
    } catch {
      // A malformed thread entry says nothing about liveness.
    }
  }
  return { kind: 'ok', states };
}

/** The numeric entries of procRoot (every visible pid), ascending. */
export async function listPids(procRoot = '/proc'): Promise<number[]> {
  const names = await fsp.readdir(procRoot);
  return names
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .sort((a, b) => a - b);
}
