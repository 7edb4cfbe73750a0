/**
 * The NVIDIA daemons a wait disregards: they keep a context on a GPU to monitor it or keep it
 * initialised, never to work on it. Any process can take a daemon's name (prctl PR_SET_NAME,
 * `exec -a`), so a holder is disregarded as a daemon only when it is one: run by root (real uid
 * 0 in /proc/PID/status) from an executable of the daemon's name (/proc/PID/exe). Any doubt (an
 * entry that cannot be read, a process that changed while it was read) counts it as a holder.
 */
import * as path from 'node:path';
import { parseStat, parseStatus, readExecutable, readProcText } from '../host/procfs';
import { realUidOf } from '../host/process-owner';
import type { Holder } from './stale';

/** The kernel keeps 15 bytes of a command name (TASK_COMM_LEN, 16 with its NUL). */
const COMM_BYTES = 15;

/** The daemon (of `daemons`, executable names) whose name `comm` carries, as /proc/PID/comm cuts it; null for none. */
export function daemonNamed(comm: string | null, daemons: ReadonlySet<string>): string | null {
  if (comm === null) return null;
  for (const daemon of daemons) if (Buffer.from(daemon).subarray(0, COMM_BYTES).toString() === comm) return daemon;
  return null;
}

/** Whether a process that carries a daemon's name is that daemon, and if not, why. */
export type DaemonProof = { genuine: true } | { genuine: false; why: string };

async function startTicks(dir: string): Promise<number | null> {
  const stat = await readProcText(path.join(dir, 'stat'));
  if (stat.kind !== 'ok') return null;
  try {
    return parseStat(stat.text).startTimeTicks;
  } catch {
    return null;
  }
}

/** Proves that `pid`, which carries the name of `daemon`, is that daemon. */
export async function proveDaemon(pid: number, daemon: string, procRoot = '/proc'): Promise<DaemonProof> {
  const dir = path.join(procRoot, String(pid));
  const before = await startTicks(dir);
  const [status, executable] = await Promise.all([readProcText(path.join(dir, 'status')), readExecutable(pid, procRoot)]);
  // The same start time before and after: owner and executable were read of one process.
  if (before === null || (await startTicks(dir)) !== before) return { genuine: false, why: 'its /proc entry could not be read or changed while it was checked' };
  const uid = status.kind === 'ok' ? realUidOf(parseStatus(status.text)) : null;
  if (uid === null) return { genuine: false, why: 'its owner cannot be read' };
  if (uid !== 0) return { genuine: false, why: `it runs as uid ${uid}, not root` };
  if (executable.kind !== 'ok') return { genuine: false, why: executable.kind === 'unreadable' ? executable.reason : 'it has no executable' };
  // A daemon whose binary a package upgrade replaced while it runs still names the file it started from.
  const name = path.basename(executable.path.replace(/ \(deleted\)$/, ''));
  if (name !== daemon) return { genuine: false, why: `its executable is ${executable.path}` };
  return { genuine: true };
}

/**
 * The pids of `holders` proven to be one of `daemons`. A holder that carries a daemon's name
 * without being it is returned with the reason it is counted appended to its own.
 */
export async function disregardedDaemons(holders: Holder[], daemons: ReadonlySet<string>, procRoot: string): Promise<{ pids: Set<number>; holders: Holder[] }> {
  const pids = new Set<number>();
  const judged = await Promise.all(
    holders.map(async (holder): Promise<Holder> => {
      const daemon = daemonNamed(holder.comm, daemons);
      if (daemon === null) return holder;
      const proof = await proveDaemon(holder.pid, daemon, procRoot);
      if (proof.genuine) {
        pids.add(holder.pid);
        return holder;
      }
      return { ...holder, reason: `${holder.reason}; named ${holder.comm} but not the ${daemon} daemon (${proof.why}): counted as a holder` };
    }),
  );
  return { pids, holders: judged };
}
