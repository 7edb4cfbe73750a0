/**
 * A process's chain of ancestors, read from procfs: host facts, no policy.
 */
import { readProcess } from './procfs';

/** The chain of ancestors of pid (its parent, grandparent, … up to PID 1), read under procRoot. */
export async function ancestorsOf(pid: number, procRoot = '/proc'): Promise<number[]> {
  const chain: number[] = [];
  let current = pid;
  for (let depth = 0; depth < 4096; depth += 1) {
    const info = await readProcess(current, procRoot);
    if (info.kind !== 'ok') break;
    const parent = info.stat.ppid;
    if (parent <= 0 || chain.includes(parent) || parent === pid) break;
    chain.push(parent);
    if (parent === 1) break;
    current = parent;
  }
  return chain;
}
