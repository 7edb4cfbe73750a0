/**
 * What a GPU lease record says and how it is judged; gpu-lease.ts stores the records. A lease
 * is bound to a holder process (its pid and start time, in the PID namespace whose /proc gpugate
 * reads) and/or to a duration. The duration is measured on the boot clock (CLOCK_BOOTTIME, as
 * /proc/uptime shows it, tied to /proc/sys/kernel/random/boot_id), never on the wall clock: a
 * wall-clock step (NTP, an administrator, a VM resumed) neither frees nor extends a lease. The
 * wall-clock times in a record are for people to read.
 *
 * A holder pid is recorded as the /proc in use numbers it. When that is the host's /proc (the
 * initial PID namespace) every selector on the host can check the holder, even one started
 * from a nested namespace that shares it: such a selector translates its own pids through NSpid.
 * When gpugate reads the /proc of a nested namespace (a container), the host could never check
 * that holder, so a lease bound to it alone is refused and one with a duration says the host
 * frees it only when the duration ends.
 */
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { ErrorCode } from '../gpugate-error';
import { formatDuration } from '../units';
import { readBootClock } from './boot-clock';
import { procPidNamespace, procPidOf } from './proc-pid-numbering';
import { INITIAL_PID_NAMESPACE } from './proc-visibility';
import { parseStat } from './procfs';

const RECORD_KIND = 'gpugate-lease';

/** What a lease file holds. */
export interface LeaseRecord {
  kind: typeof RECORD_KIND;
  /** The GPU (or MIG instance) UUID the lease is for. */
  uuid: string;
  /** For a MIG instance, its whole GPU's UUID: a lease on either covers both. Null for a whole GPU. */
  parentUuid: string | null;
  /** The process the GPU is handed to, as the /proc of `pidNamespace` numbers it; null when only the duration bounds the lease. */
  holderPid: number | null;
  /** Field 22 of the holder's /proc/PID/stat when leased: a reused pid has another. */
  holderStartTicks: number | null;
  /** The holder's command name when leased (for messages only). */
  holderComm: string | null;
  /** The PID namespace `holderPid` is valid in (`pid:[inode]`; the initial one is `pid:[4026531836]`). */
  pidNamespace: string | null;
  /** /proc/sys/kernel/random/boot_id when leased: the boot clock values below belong to this boot. */
  bootId: string | null;
  /** Epoch milliseconds when taken (for people: the decision uses sinceBootMs). */
  createdAt: number;
  /** Epoch milliseconds when the duration ends (for people); null: until the holder exits. */
  expiresAt: number | null;
  /** Milliseconds since boot (CLOCK_BOOTTIME) when taken. */
  sinceBootMs: number | null;
  /** Milliseconds since boot after which the lease is free; null: until the holder exits. */
  expiresSinceBootMs: number | null;
  /** The gpugate process that wrote it (as the same /proc numbers it). */
  selectorPid: number;
}

/** Who a new lease is for. */
export interface LeaseTerms {
  /** The process that will use the GPUs, in the caller's PID namespace; null for a lease bounded by durationMs alone. */
  holderPid: number | null;
  /** Free the lease this long after it is taken; null: only when the holder exits. */
  durationMs: number | null;
}

/** Why a lease cannot be written as asked: the holder is gone, the host could never check it, the boot clock is unreadable. */
export type LeaseRefusalCode = typeof ErrorCode.leaseHolderGone | typeof ErrorCode.leaseNamespace | typeof ErrorCode.leaseClockUnreadable;

/** Why a lease cannot be written as asked: its code, the path involved, and the words. */
export interface LeaseRefusal {
  refused: { code: LeaseRefusalCode; path: string; message: string };
}

/** A new record, with what a reader should be told about its reach. */
export interface NewLease {
  record: LeaseRecord;
  /** Set when the host cannot check the holder: it frees the lease only when the duration ends. */
  warning: string | null;
}

/** Whether `value` is a lease record (of any UUID: the caller compares the UUID with the file's name). */
export function isLeaseRecord(value: unknown): value is LeaseRecord {
  if (typeof value !== 'object' || value === null) return false;
  const r = value as Record<string, unknown>;
  const intOrNull = (v: unknown): boolean => v === null || (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0);
  const strOrNull = (v: unknown): boolean => v === null || typeof v === 'string';
  return (
    r['kind'] === RECORD_KIND &&
    typeof r['uuid'] === 'string' &&
    strOrNull(r['parentUuid']) &&
    intOrNull(r['holderPid']) &&
    intOrNull(r['holderStartTicks']) &&
    strOrNull(r['holderComm']) &&
    strOrNull(r['pidNamespace']) &&
    strOrNull(r['bootId']) &&
    typeof r['createdAt'] === 'number' &&
    intOrNull(r['expiresAt']) &&
    intOrNull(r['sinceBootMs']) &&
    intOrNull(r['expiresSinceBootMs']) &&
    typeof r['selectorPid'] === 'number' &&
    (r['holderPid'] !== null || r['expiresSinceBootMs'] !== null)
  );
}

/** The process a lease names, read now: its start ticks and command name, or why it is not there. */
type HolderProbe = { kind: 'running'; startTicks: number; comm: string } | { kind: 'exited'; why: string } | { kind: 'unknown'; why: string };

function probeHolder(pid: number, procRoot: string): HolderProbe {
  const file = path.join(procRoot, String(pid), 'stat');
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'EIO';
    if (code === 'ENOENT' || code === 'ESRCH') return { kind: 'exited', why: `holder pid ${pid} has exited` };
    return { kind: 'unknown', why: `cannot read ${file}: ${code}` };
  }
  try {
    const stat = parseStat(text);
    // A zombie has finished; only its parent's wait() is missing. Its GPUs are no longer used.
    if (stat.state === 'Z' || stat.state === 'X') return { kind: 'exited', why: `holder pid ${pid} has exited (state ${stat.state})` };
    return { kind: 'running', startTicks: stat.startTimeTicks, comm: stat.comm };
  } catch (error) {
    return { kind: 'unknown', why: (error as Error).message };
  }
}

/**
 * A new lease record for `uuid` (a MIG instance's whole GPU in `parentUuid`), with the holder
 * read from /proc now; or why none may be written: the holder does not exist (GPUGATE_LEASE_HOLDER_GONE),
 * a duration cannot be measured (GPUGATE_LEASE_CLOCK_UNREADABLE), or the lease would be bound to a
 * process the host can never check, with no duration to end it (GPUGATE_LEASE_NAMESPACE).
 */
export function makeLeaseRecord(uuid: string, parentUuid: string | null, terms: LeaseTerms, procRoot: string, createdAt: number): NewLease | LeaseRefusal {
  const clock = readBootClock(procRoot);
  let expiresSinceBootMs: number | null = null;
  if (terms.durationMs !== null) {
    if (clock.bootId === null || clock.sinceBootMs === null) {
      return { refused: { code: ErrorCode.leaseClockUnreadable, path: path.join(procRoot, 'uptime'), message: `cannot read the boot clock (${path.join(procRoot, 'uptime')} and ${path.join(procRoot, 'sys', 'kernel', 'random', 'boot_id')}), which a lease's duration is measured on` } };
    }
    expiresSinceBootMs = clock.sinceBootMs + Math.ceil(terms.durationMs);
  }
  const pidNamespace = procPidNamespace(procRoot);
  let holderPid: number | null = null;
  let holderStartTicks: number | null = null;
  let holderComm: string | null = null;
  let warning: string | null = null;
  if (terms.holderPid !== null) {
    holderPid = procPidOf(terms.holderPid, procRoot);
    const probe: HolderProbe = holderPid === null ? { kind: 'exited', why: `no process ${terms.holderPid} in gpugate's PID namespace is listed in ${procRoot}` } : probeHolder(holderPid, procRoot);
    if (probe.kind !== 'running') {
      return { refused: { code: ErrorCode.leaseHolderGone, path: path.join(procRoot, String(terms.holderPid)), message: `cannot lease to pid ${terms.holderPid}: ${probe.why}` } };
    }
    holderStartTicks = probe.startTicks;
    holderComm = probe.comm;
    if (pidNamespace !== INITIAL_PID_NAMESPACE) {
      const where = `gpugate reads the /proc of PID namespace ${pidNamespace ?? '(unknown)'}, not the host's ${INITIAL_PID_NAMESPACE}`;
      if (terms.durationMs === null) {
        return { refused: { code: ErrorCode.leaseNamespace, path: path.join(procRoot, 'self', 'ns', 'pid'), message: `${where}: a lease bound to pid ${terms.holderPid} could never be checked from the host, which would count these GPUs leased until the file is removed; give the lease a duration, or select in the host's PID namespace` } };
      }
      warning = `${where}: the host cannot check holder pid ${terms.holderPid}, so for it the lease ends only after ${formatDuration(terms.durationMs)}`;
    }
  }
  return {
    record: {
      kind: RECORD_KIND,
      uuid,
      parentUuid,
      holderPid,
      holderStartTicks,
      holderComm,
      pidNamespace,
      bootId: clock.bootId,
      createdAt,
      expiresAt: terms.durationMs === null ? null : createdAt + Math.ceil(terms.durationMs),
      sinceBootMs: clock.sinceBootMs,
      expiresSinceBootMs,
      selectorPid: procPidOf(process.pid, procRoot) ?? process.pid,
    },
    warning,
  };
}

/**
 * Whether a lease holds now: stale when taken in an earlier boot, when its duration has run out
 * on the boot clock, or when its holder has exited (or the pid names another process); held in
 * every other case, doubt included (a boot clock or /proc entry that cannot be read, a holder in
 * a PID namespace this /proc does not number). `nowMs` (epoch) only dates the words.
 */
export function judgeLease(record: LeaseRecord, procRoot: string, nowMs: number): ['held' | 'stale', string] {
  const clock = readBootClock(procRoot);
  if (record.bootId !== null && clock.bootId !== null && record.bootId !== clock.bootId) return ['stale', 'taken before the last boot'];
  const sameBoot = record.bootId !== null && record.bootId === clock.bootId;
  let until = '';
  if (record.expiresSinceBootMs !== null) {
    if (sameBoot && clock.sinceBootMs !== null) {
      const leftMs = record.expiresSinceBootMs - clock.sinceBootMs;
      if (leftMs <= 0) return ['stale', `expired ${formatDuration(-leftMs)} ago (measured on the boot clock)`];
      until = ` until ${new Date(nowMs + leftMs).toISOString()}`;
    } else {
      until = ` until ${record.expiresAt === null ? '(unknown)' : new Date(record.expiresAt).toISOString()} by its writer's clock (the boot clock cannot be compared, so it counts as not expired)`;
    }
  }
  if (record.holderPid === null) return ['held', `leased${until}`];
  const who = `pid ${record.holderPid}${record.holderComm === null ? '' : ` (${record.holderComm})`}`;
  const namespace = procPidNamespace(procRoot);
  if (record.pidNamespace === null || namespace === null || record.pidNamespace !== namespace) {
    return ['held', `leased to ${who} in PID namespace ${record.pidNamespace ?? 'unknown'}, which cannot be checked from ${namespace ?? 'an unknown one'}${until}`];
  }
  const probe = probeHolder(record.holderPid, procRoot);
  if (probe.kind === 'exited') return ['stale', probe.why];
  if (probe.kind === 'unknown') return ['held', `leased to ${who}; ${probe.why}, so it counts as alive${until}`];
  if (record.holderStartTicks === null || probe.startTicks !== record.holderStartTicks) {
    return ['stale', `holder pid ${record.holderPid} has exited (the pid now names another process, started at tick ${probe.startTicks}, not ${record.holderStartTicks ?? 'unknown'})`];
  }
  return ['held', `leased to ${who}${until}`];
}
