/**
 * Real cgroup directories and a GPU device stand-in for tests that run processes the way
 * systemd places them: a `.service` cgroup (optionally with a `.control` child) in systemd's
 * named v1 hierarchy or in the unified (v2) hierarchy, with real processes moved in through
 * cgroup.procs. Everything created is removed by the returned cleanups (call them in afterEach).
 */
import { existsSync, mkdirSync, readFileSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';

/** The two hierarchies systemd names units in. */
export const HIERARCHIES = {
  named: { root: '/sys/fs/cgroup/systemd', line: /^\d+:name=systemd:/m },
  unified: { root: '/sys/fs/cgroup/unified', line: /^0::/m },
} as const;

export type HierarchyName = keyof typeof HIERARCHIES;

/** Why a test cannot create cgroups in `hierarchy` here, or null when it can. */
export function cgroupUnavailable(hierarchy: HierarchyName): string | null {
  if (process.getuid?.() !== 0) return 'needs root to create a cgroup';
  const { root, line } = HIERARCHIES[hierarchy];
  if (!existsSync(path.join(root, 'cgroup.procs'))) return `no ${hierarchy} cgroup hierarchy at ${root}`;
  const self = readFileSync('/proc/self/cgroup', 'utf8');
  if (!line.test(self)) return `this process is not in the ${hierarchy} hierarchy`;
  // gpugate reads the unit from the unified path unless that is the root: for the named
  // hierarchy to be the one read, the unified path must be the root.
  if (hierarchy === 'named' && /^0::(?!\/$).+$/m.test(self)) return 'the unified cgroup path is not the root here';
  return null;
}

/** A created cgroup: its path as /proc/PID/cgroup shows it, and how to move a process in. */
export interface TestCgroup {
  /** e.g. /system.slice/gpugate-test-1-2.service */
  path: string;
  procs: string;
  join(pid: number): void;
}

/** Moves every process in `dir` back to the hierarchy's root and removes `dir` (retrying while they leave). */
function removeCgroupDir(root: string, dir: string): void {
  for (let attempt = 0; attempt < 100; attempt++) {
    try {
      for (const pid of readFileSync(path.join(dir, 'cgroup.procs'), 'utf8').split('\n').filter((l) => l !== '')) {
        try {
          writeFileSync(path.join(root, 'cgroup.procs'), pid);
        } catch {
          // exited meanwhile
        }
      }
      rmdirSync(dir);
      return;
    } catch {
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
    }
  }
}

/**
 * Creates the cgroup `cgroupPath` (e.g. `/kubepods.slice/…/cri-containerd-ID.scope`) in
 * `hierarchy`, with any missing groups above it. The cleanup empties and removes, deepest first,
 * every directory this call created.
 */
export function makeCgroup(hierarchy: HierarchyName, cgroupPath: string, cleanups: Array<() => void>): TestCgroup {
  const { root } = HIERARCHIES[hierarchy];
  const created: string[] = [];
  let dir: string = root;
  for (const part of cgroupPath.split('/').filter((p) => p !== '')) {
    dir = path.join(dir, part);
    if (!existsSync(dir)) {
      mkdirSync(dir);
      created.push(dir);
    }
  }
  const procs = path.join(dir, 'cgroup.procs');
  cleanups.push(() => {
    for (const made of created.reverse()) removeCgroupDir(root, made);
  });
  return { path: cgroupPath, procs, join: (pid) => writeFileSync(procs, String(pid)) };
}

/**
 * Creates `/system.slice/<name>.service` (and `sub` below it, e.g. '.control') in `hierarchy`.
 * The cleanup moves any process still inside back to the root and removes the directories.
 */
export function makeServiceCgroup(hierarchy: HierarchyName, name: string, cleanups: Array<() => void>, sub: string[] = []): { unit: TestCgroup; subs: TestCgroup[] } {
  const { root } = HIERARCHIES[hierarchy];
  const unitPath = `/system.slice/${name}-${process.pid}-${Date.now()}.service`;
  const make = (cgroupPath: string): TestCgroup => {
    const dir = path.join(root, cgroupPath);
    mkdirSync(dir, { recursive: true });
    const procs = path.join(dir, 'cgroup.procs');
    return { path: cgroupPath, procs, join: (pid) => writeFileSync(procs, String(pid)) };
  };
  const unit = make(unitPath);
  const subs = sub.map((s) => make(`${unitPath}/${s}`));
  cleanups.push(() => {
    for (const group of [...subs, unit]) removeCgroupDir(root, path.join(root, group.path));
  });
  return { unit, subs };
}

let standIns = 0;

/**
 * A regular file named like a GPU device node (`/dev/nvidia-gpugate-test-…`): a process that
 * opens it has, as far as /proc/PID/fd shows, a /dev/nvidia* descriptor — what gpugate checks
 * before it calls a listed pid a real holder. Removed by the cleanup.
 */
export function deviceStandIn(cleanups: Array<() => void>): string {
  standIns += 1;
  const file = `/dev/nvidia-gpugate-test-${process.pid}-${standIns}`;
  writeFileSync(file, '');
  cleanups.push(() => rmSync(file, { force: true }));
  return file;
}
