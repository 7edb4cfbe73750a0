/**
 * Who owns a process and where it lives: its user (the real uid of /proc/PID/status, named from a
 * passwd file), when it started and how old it is, its whole command line, and its unit,
 * container and pod (from its cgroup path). Node has no getpwuid, so the passwd file is parsed;
 * a user known only through NSS (LDAP, sssd) keeps its uid without a name. Parsers are pure;
 * readers take their roots as arguments and return "missing" / "unreadable" as values.
 */
import * as path from 'node:path';
import { cgroupLocation, type CgroupLocation } from './cgroup-location';
import { readBootTimeMs, readProcText, readProcess, startTimeMsOf, type ProcessInfo, type ReadFailure } from './procfs';

/** Who owns a process and where it lives. */
export interface ProcessOwner {
  /** The real uid (first field of `Uid:` in /proc/PID/status, as `ps -o ruid`); null when unreadable. */
  uid: number | null;
  /** The uid's name in the passwd file; null when the uid is unknown or has no entry there. */
  user: string | null;
  /** When it started, epoch milliseconds; null without a boot time. */
  startedAt: number | null;
  /** How long it had run when it was read, in milliseconds; null when its start is unknown. */
  ageMs: number | null;
  /** The whole command line, one element per argument; null when empty (a zombie) or unreadable. */
  argv: string[] | null;
  location: CgroupLocation;
}

/** Names by uid. */
export type UserNames = ReadonlyMap<number, string>;

/** The default passwd file. */
export const PASSWD_PATH = '/etc/passwd';

/**
 * Parses a passwd file (`name:password:uid:gid:gecos:home:shell`) into names by uid. The first
 * entry of a uid wins, as getpwuid answers; comments, blank, malformed and NIS (`+`/`-`) lines are skipped.
 */
export function parsePasswd(text: string): Map<number, string> {
  const names = new Map<number, string>();
  for (const line of text.split('\n')) {
    const fields = line.split(':');
    if (fields.length < 4) continue;
    const [name, , uidText] = fields as [string, string, string];
    if (name === '' || name.startsWith('#') || name.startsWith('+') || name.startsWith('-') || !/^\d+$/.test(uidText)) continue;
    const uid = Number(uidText);
    if (Number.isSafeInteger(uid) && !names.has(uid)) names.set(uid, name);
  }
  return names;
}

/** Reads names by uid from a passwd file. */
export async function readUserNames(passwdPath: string = PASSWD_PATH): Promise<{ kind: 'ok'; names: Map<number, string> } | ReadFailure> {
  const text = await readProcText(passwdPath);
  if (text.kind !== 'ok') return text;
  return { kind: 'ok', names: parsePasswd(text.text) };
}

/** The real uid from parsed /proc/PID/status fields (`Uid: real effective saved fs`), or null. */
export function realUidOf(status: ReadonlyMap<string, string> | null): number | null {
  const first = status?.get('Uid')?.split(/\s+/)[0];
  if (first === undefined || !/^\d+$/.test(first)) return null;
  return Number(first);
}

/** What ownerOf needs besides the process itself. */
export interface OwnerFacts {
  userNames: UserNames;
  /** Boot time, epoch ms (procfs start times count from it); null when unknown. */
  bootTimeMs: number | null;
  /** The moment the age is measured at, epoch ms (the snapshot's time). */
  atMs: number;
}

/** The owner of a process read by readProcess. Pure. */
export function ownerOf(info: ProcessInfo, facts: OwnerFacts): ProcessOwner {
  const uid = realUidOf(info.status);
  const startedAt = facts.bootTimeMs === null ? null : startTimeMsOf(info.stat, facts.bootTimeMs);
  return {
    uid,
    user: uid === null ? null : facts.userNames.get(uid) ?? null,
    startedAt,
    // btime has one-second resolution: a process started just now may seem to start a little ahead.
    ageMs: startedAt === null ? null : Math.max(0, facts.atMs - startedAt),
    argv: info.argv,
    location: cgroupLocation(info.cgroup),
  };
}

/** Where readProcessOwner looks. */
export interface OwnerReadOptions {
  /** Default /proc. */
  procRoot?: string;
  /** Default /etc/passwd. An unreadable file leaves every owner without a name. */
  passwdPath?: string;
  /** When the age is measured, epoch ms; default now. */
  atMs?: number;
}

/** Reads the owner of `pid`: "missing" when there is no such process, "unreadable" when its stat cannot be read. */
export async function readProcessOwner(pid: number, options: OwnerReadOptions = {}): Promise<{ kind: 'ok'; owner: ProcessOwner } | ReadFailure> {
  const procRoot = options.procRoot ?? '/proc';
  const [info, names, bootTimeMs] = await Promise.all([
    readProcess(pid, procRoot),
    readUserNames(options.passwdPath ?? PASSWD_PATH),
    readBootTimeMs(path.resolve(procRoot)),
  ]);
  if (info.kind !== 'ok') return info;
  const userNames = names.kind === 'ok' ? names.names : new Map<number, string>();
  return { kind: 'ok', owner: ownerOf(info, { userNames, bootTimeMs, atMs: options.atMs ?? Date.now() }) };
}
