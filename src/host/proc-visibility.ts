/**
 * What gpugate's view of /proc leaves out. NVML names holders by host pid, and an unused
 * /dev/shm file can only be told from a used one by looking at every process that could hold it:
 * both need a procfs that shows every process of the host. Two things hide processes: a nested
 * PID namespace (or a procfs of another namespace), and procfs's hidepid option for a reader
 * without CAP_SYS_PTRACE. Each reader returns null (nothing hidden) or the reason, as a value.
 */
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { parseMountinfo, parseNSpid, parseStatus, readProcText } from './procfs';

/** The inode of the initial PID namespace (the kernel's PROC_PID_INIT_INO): every other one is nested. */
export const INITIAL_PID_NAMESPACE = 'pid:[4026531836]';

/** CAP_SYS_PTRACE's bit in CapEff: a reader holding it sees past hidepid. */
const CAP_SYS_PTRACE = 19n;

/**
 * Why host pids cannot be looked up under procRoot, or null when they can: gpugate runs in a
 * nested PID namespace (NSpid lists several ids, or its namespace is not the initial one: a
 * procfs of the nested namespace shows one NSpid only), or the procfs there belongs to another
 * PID namespace than gpugate's (its `self` does not name gpugate). `consequence` ends the reason.
 */
export async function pidNamespaceObstacle(procRoot: string, selfPid: number, consequence: string): Promise<string | null> {
  const status = await readProcText(path.join(procRoot, String(selfPid), 'status'));
  const nspid = status.kind === 'ok' ? parseNSpid(status.text) : [];
  if (nspid.length > 1) return `gpugate runs in a nested PID namespace (NSpid ${nspid.join(' ')}): ${consequence}`;
  const namespace = await fsp.readlink(path.join(procRoot, String(selfPid), 'ns', 'pid')).catch(() => null);
  if (namespace !== null && namespace !== INITIAL_PID_NAMESPACE) {
    return `gpugate runs in a nested PID namespace (${namespace}, not the initial ${INITIAL_PID_NAMESPACE}): ${consequence}`;
  }
  // Only a real procfs has `self`; a prepared test tree does not.
  const selfLink = path.join(procRoot, 'self');
  if ((await fsp.lstat(selfLink).catch(() => null)) === null) return null;
  const seen = await fsp.readlink(selfLink).catch(() => null);
  if (seen !== String(process.pid)) {
    return `the procfs at ${procRoot} belongs to another PID namespace (its self is ${seen ?? 'not this process'}, this process is pid ${process.pid}): ${consequence}`;
  }
  return null;
}

/** The hidepid option of the procfs mounted last on /proc (mounts stack), or null when it hides nothing. */
export async function procHidepid(procRoot: string, selfPid: number): Promise<string | null> {
  const mountinfo = await readProcText(path.join(procRoot, String(selfPid), 'mountinfo'));
  if (mountinfo.kind !== 'ok') return null;
  const procMount = parseMountinfo(mountinfo.text).filter((m) => m.fsType === 'proc' && m.mountPoint === '/proc').pop();
  return procMount?.superOptions.find((o) => o.startsWith('hidepid=') && o !== 'hidepid=0' && o !== 'hidepid=off') ?? null;
}

/**
 * Why some process of the host may be missing from procRoot for this reader, or null when every
 * process is listed: the PID-namespace obstacle, or hidepid while the reader lacks CAP_SYS_PTRACE
 * (hidepid=1 / noaccess lists every pid but hides their files: those show as unreadable instead).
 */
export async function hiddenProcessesReason(procRoot: string, selfPid: number, consequence: string): Promise<string | null> {
  const namespace = await pidNamespaceObstacle(procRoot, selfPid, consequence);
  if (namespace !== null) return namespace;
  const hidepid = await procHidepid(procRoot, selfPid);
  if (hidepid === null || hidepid === 'hidepid=1' || hidepid === 'hidepid=noaccess') return null;
  const status = await readProcText(path.join(procRoot, String(selfPid), 'status'));
  const capEff = status.kind === 'ok' ? parseStatus(status.text).get('CapEff') : undefined;
  if (capEff !== undefined && /^[0-9a-f]+$/i.test(capEff) && ((BigInt(`0x${capEff}`) >> CAP_SYS_PTRACE) & 1n) === 1n) return null;
  return `procfs is mounted with ${hidepid} and gpugate lacks CAP_SYS_PTRACE: other users' processes are not listed: ${consequence}`;
}
