/**
 * Prepared procfs trees for the stale-detection tests: a temp directory shaped like /proc whose
 * entries either copy a real process's files (so pids, start times and parents stay true) or are
 * written by hand (state D, the exiting flag, nested namespaces, unreadable descriptors).
 */
import { mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { makeTestTempDir } from './temp-root';

/** What to write for one pid. Unset fields are copied from the real /proc/PID when `copyFrom` is set. */
export interface FakeProcess {
  pid: number;
  /** Copy stat/status/comm/cmdline from this real pid (default: none). */
  copyFrom?: number;
  stat?: string;
  status?: string;
  comm?: string;
  cmdline?: string;
  cgroup?: string;
  /** NUL-separated environment (as /proc/PID/environ); e.g. `INVOCATION_ID=…\0`. Never copied. */
  environ?: string;
  /** fd number -> link target; 'not-a-directory' makes the fd entry unreadable. */
  fds?: Record<string, string> | 'not-a-directory';
  maps?: string;
  /** tid -> stat text for /proc/PID/task. */
  tasks?: Record<string, string>;
}

/** Builds a stat line; `after` overrides fields by number (3 = state, 4 = ppid, 9 = flags, 22 = starttime). */
export function makeStat(pid: number, comm: string, fields: Record<number, string | number> = {}): string {
  const values: Array<string | number> = [];
  for (let field = 3; field <= 52; field += 1) values.push(field === 3 ? 'S' : field === 20 ? 1 : 0);
  for (const [field, value] of Object.entries(fields)) values[Number(field) - 3] = value;
  return `${pid} (${comm}) ${values.join(' ')}\n`;
}

/** Replaces stat fields (by number) in a real stat line, keeping the comm intact. */
export function editStat(text: string, fields: Record<number, string | number>): string {
  const close = text.lastIndexOf(')');
  const rest = text.slice(close + 2).trim().split(' ');
  for (const [field, value] of Object.entries(fields)) rest[Number(field) - 3] = String(value);
  return `${text.slice(0, close + 1)} ${rest.join(' ')}\n`;
}

function realFile(pid: number, name: string): string {
  return readFileSync(`/proc/${pid}/${name}`, 'utf8');
}

/** A temp procfs tree; call remove() when done. */
export class ProcRoot {
  readonly root = makeTestTempDir('gpugate-proc-');

  constructor() {
    writeFileSync(path.join(this.root, 'stat'), readFileSync('/proc/stat', 'utf8'));
  }

  add(entry: FakeProcess): this {
    const dir = path.join(this.root, String(entry.pid));
    mkdirSync(dir, { recursive: true });
    const copy = (name: string, given: string | undefined): void => {
      const text = given ?? (entry.copyFrom !== undefined ? realFile(entry.copyFrom, name) : undefined);
      if (text !== undefined) writeFileSync(path.join(dir, name), text);
    };
    copy('stat', entry.stat);
    copy('status', entry.status);
    copy('comm', entry.comm);
    copy('cmdline', entry.cmdline);
    if (entry.cgroup !== undefined) writeFileSync(path.join(dir, 'cgroup'), entry.cgroup);
    if (entry.environ !== undefined) writeFileSync(path.join(dir, 'environ'), entry.environ);
    writeFileSync(path.join(dir, 'maps'), entry.maps ?? '');
    if (entry.fds === 'not-a-directory') {
      writeFileSync(path.join(dir, 'fd'), '');
    } else {
      mkdirSync(path.join(dir, 'fd'));
      for (const [fd, target] of Object.entries(entry.fds ?? {})) symlinkSync(target, path.join(dir, 'fd', fd));
    }
    if (entry.tasks) {
      for (const [tid, stat] of Object.entries(entry.tasks)) {
        mkdirSync(path.join(dir, 'task', tid), { recursive: true });
        writeFileSync(path.join(dir, 'task', tid, 'stat'), stat);
      }
    }
    return this;
  }

  remove(): void {
    rmSync(this.root, { recursive: true, force: true });
  }
}

/**
 * A procfs root that shows only the given real processes (each entry a symlink to /proc/PID), so
 * a test sees exactly the processes it spawned, read through their real /proc files.
 */
export function mirrorProcRoot(pids: number[]): { root: string; add(pid: number): void; remove(): void } {
  const root = makeTestTempDir('gpugate-mirror-');
  writeFileSync(path.join(root, 'stat'), readFileSync('/proc/stat', 'utf8'));
  const add = (pid: number): void => symlinkSync(`/proc/${pid}`, path.join(root, String(pid)));
  for (const pid of pids) add(pid);
  return { root, add, remove: () => rmSync(root, { recursive: true, force: true }) };
}
