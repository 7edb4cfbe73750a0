/**
 * The activation gpugate runs in (systemd's INVOCATION_ID and the start of its first process),
 * what tells this attempt's processes from an earlier attempt's.
 */
import * as path from 'node:path';
import { environValue, readProcText, readProcess, startTimeMsOf } from '../host/procfs';
import { inCgroup, unitCgroupMembers } from './unit-cgroup';

/**
 * The current activation of the caller's unit. systemd gives every activation (each start and
 * each automatic restart) a new INVOCATION_ID and puts it in the environment of every process it
 * starts for the unit, which their children inherit; /proc/PID/environ keeps the environment a
 * process was started with, unless the process wrote over it (setproctitle does). Where that
 * cannot answer, the start time of the first process of this activation that gpugate can see
 * (its topmost ancestor in the unit cgroup, or an earlier process of the unit showing the same
 * INVOCATION_ID) is the bound: a process of the unit that started before it is a leftover.
 */
export interface Activation {
  /** The caller's INVOCATION_ID, null when it has none (not started by systemd). */
  invocationId: string | null;
  /** Epoch ms when the first process of this activation that gpugate can see started; null when unknown. */
  startedAt: number | null;
}

/** systemd's INVOCATION_ID: 128 bits written as 32 lowercase hex digits. */
const INVOCATION_ID_RE = /^[0-9a-f]{32}$/;

/** What a process's environment tells about its activation: an INVOCATION_ID, or why it tells nothing. */
export type EnvironWitness = { kind: 'id'; id: string } | { kind: 'silent'; why: string };

/**
 * The INVOCATION_ID in /proc/PID/environ. The kernel shows the memory the environment was placed
 * in at exec, which the process may overwrite: setproctitle (how vLLM names its workers) writes
 * the title over it, leaving NULs or its remains. An absent, unreadable or malformed value is no
 * evidence either way.
 */
export async function readInvocationId(pid: number, procRoot: string): Promise<EnvironWitness> {
  const environ = await readProcText(path.join(procRoot, String(pid), 'environ'));
  if (environ.kind !== 'ok') return { kind: 'silent', why: 'has an unreadable environment' };
  const value = environValue(environ.text, 'INVOCATION_ID');
  if (value === null) return { kind: 'silent', why: 'shows no INVOCATION_ID in its environment (cleared, or written over as setproctitle does)' };
  if (!INVOCATION_ID_RE.test(value)) {
    return { kind: 'silent', why: `shows an INVOCATION_ID that is not one (${JSON.stringify(value.slice(0, 40))}; systemd writes 32 hex digits)` };
  }
  return { kind: 'id', id: value };
}

/**
 * The activation the caller runs in (see {@link Activation}). Its start is bounded by the
 * earliest process gpugate can tie to it: its topmost ancestor in the unit cgroup, or any
 * process of the unit whose environment shows the caller's INVOCATION_ID.
 */
export async function readActivation(selfPid: number, ancestors: number[], unitCgroup: string | null, roots: { procRoot: string; cgroupRoot: string }, bootTimeMs: number | null): Promise<Activation> {
  const { procRoot, cgroupRoot } = roots;
  const own = await readInvocationId(selfPid, procRoot);
  const invocationId = own.kind === 'id' ? own.id : null;
  if (unitCgroup === null || bootTimeMs === null) return { invocationId, startedAt: null };
  let startedAt: number | null = null;
  for (const pid of [selfPid, ...ancestors]) {
    if (pid === 1) break;
    const info = await readProcess(pid, procRoot);
    if (info.kind !== 'ok' || !inCgroup(info.cgroup, unitCgroup)) break;
    startedAt = startTimeMsOf(info.stat, bootTimeMs);
  }
  if (invocationId === null) return { invocationId, startedAt };
  for (const pid of await unitCgroupMembers(unitCgroup, procRoot, cgroupRoot)) {
    const witness = await readInvocationId(pid, procRoot);
    if (witness.kind !== 'id' || witness.id !== invocationId) continue;
    const info = await readProcess(pid, procRoot);
    if (info.kind !== 'ok' || !inCgroup(info.cgroup, unitCgroup)) continue;
    const started = startTimeMsOf(info.stat, bootTimeMs);
    if (startedAt === null || started < startedAt) startedAt = started;
  }
  return { invocationId, startedAt };
}
