/**
 * The NVML helper processes a test's sessions spawn: they are children of this process (of the
 * session's worker thread, which spawned them), recognised by their executable, the helper file of
 * this build. Shared by the helper and direct-path suites.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import * as path from 'node:path';
import { repoRoot } from './session-helpers';

export const HELPER_FILE = path.join(repoRoot, 'build', 'Release', 'gpugate-nvml-helper');

/** The executable of `pid`, or null once it is gone (or unreadable). */
export function exeOf(pid: number): string | null {
  try {
    return readlinkSync(`/proc/${pid}/exe`);
  } catch {
    return null;
  }
}

/** The children of each thread of this process, by thread id, as the kernel lists them. */
function childrenByTask(): Array<{ task: string; pids: number[] }> {
  return readdirSync(`/proc/${process.pid}/task`).map((task) => {
    try {
      return { task, pids: readFileSync(`/proc/${process.pid}/task/${task}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number) };
    } catch {
      return { task, pids: [] };
    }
  });
}

/** This process's children (every thread's). */
function children(): number[] {
  return childrenByTask().flatMap((entry) => entry.pids);
}

/** The children of this process running the helper file. */
export function helperChildren(): number[] {
  return children().filter((pid) => exeOf(pid) === HELPER_FILE);
}

/** The thread of this process whose child `pid` is (a session's worker thread, for its helper). */
export function parentTask(pid: number): string {
  const entry = childrenByTask().find((candidate) => candidate.pids.includes(pid));
  if (entry === undefined) throw new Error(`no thread of this process is the parent of ${pid}`);
  return entry.task;
}

/** Resolves with what `probe` returns once that is not undefined, looking again on every turn of a short timer. */
export async function untilDefined<T>(probe: () => T | undefined, what: string, limitMs = 15_000): Promise<T> {
  const started = Date.now();
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() - started > limitMs) throw new Error(`gave up waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** The one helper child spawned since `before` was listed. */
export async function newHelper(before: number[]): Promise<number> {
  return untilDefined(() => {
    const fresh = helperChildren().filter((pid) => !before.includes(pid));
    return fresh.length === 1 ? fresh[0] : undefined;
  }, 'the session to spawn its helper');
}
