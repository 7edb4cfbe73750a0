/**
 * The caller's facts that holder classification needs (its ancestors, unit cgroup, activation,
 * procfs options, user names), kept between inspectHolders calls instead of being read again
 * each time. They are reused only while a cheap witness shows the caller unchanged: the same
 * chain of ancestors (a dead ancestor reparents its child and so changes the chain), the same
 * cgroup, the same /etc/passwd file; and for at most CONTEXT_REUSE_MS, which bounds what no
 * witness sees (a procfs remount). The facts only describe holders: nothing is ever signalled on
 * their strength (src/gate/reap.ts proves each target's identity again at the moment it acts).
 */
import { statSync } from 'node:fs';
import { monotonicMs } from '../monotonic-clock';
import { readProcess } from '../host/procfs';
import { ancestorsOf } from '../host/process-ancestors';
import { PASSWD_PATH } from '../host/process-owner';
import type { InspectContext, InspectOptions } from './inspect-context';

/** The longest a prepared context is reused, whatever its witness says. */
export const CONTEXT_REUSE_MS = 60_000;

/** Where inspectHolders' context came from: given by the caller, read for this call, or reused from an earlier one. */
export type ContextSource = 'given' | 'read' | 'reused';

interface Kept {
  key: string;
  witness: string;
  preparedAt: number;
  context: InspectContext;
}

let kept: Kept | null = null;

/** The options that shape a context; a call with others prepares its own. */
function keyOf(options: InspectOptions): string {
  const { procRoot, cgroupRoot, devRoot, selfPid, unitCgroup, reaperPids, passwdPath } = options;
  return JSON.stringify([procRoot, cgroupRoot, devRoot, selfPid, unitCgroup, reaperPids, passwdPath]);
}

/** What would change if the caller's facts did: its ancestors, its cgroup, the passwd file. */
async function witnessOf(options: InspectOptions): Promise<string> {
  const procRoot = options.procRoot ?? '/proc';
  const selfPid = options.selfPid ?? process.pid;
  const [ancestors, self] = await Promise.all([ancestorsOf(selfPid, procRoot), readProcess(selfPid, procRoot)]);
  let passwd = 'unreadable';
  try {
    const stat = statSync(options.passwdPath ?? PASSWD_PATH, { bigint: true });
    passwd = `${stat.ino}:${stat.mtimeNs}:${stat.size}`;
  } catch {
    // An unreadable passwd file gives no names either way.
  }
  return JSON.stringify([ancestors, self.kind === 'ok' ? self.cgroup : self.kind, passwd]);
}

/** The context for `options`: the kept one while its witness holds, else a fresh one from `prepare` (then kept). */
export async function sharedInspectContext(options: InspectOptions, prepare: () => Promise<InspectContext>): Promise<{ context: InspectContext; source: ContextSource }> {
  const key = keyOf(options);
  const witness = await witnessOf(options);
  const now = monotonicMs();
  if (kept !== null && kept.key === key && kept.witness === witness && now - kept.preparedAt < CONTEXT_REUSE_MS) {
    return { context: kept.context, source: 'reused' };
  }
  const context = await prepare();
  kept = { key, witness, preparedAt: now, context };
  return { context, source: 'read' };
}
