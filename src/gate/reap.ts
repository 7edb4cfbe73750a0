/**
 * reapStale: signals the holders proven to be leftovers of this service (class 'leftover'):
 * SIGTERM, then SIGKILL after a grace period if still alive. Never PID 1, the caller, its
 * ancestors, a draining task, or a process whose identity (start time and cgroup) no longer
 * matches the one that was classified. Each target is held by a pidfd from before the first
 * signal to the last, so a pid reused during the grace is never hit; without pidfds the identity
 * is re-read immediately before each signal and any doubt skips the signal. Every other holder is
 * reported as skipped with the reason. dryRun signals nothing.
 */
import { closeSync } from 'node:fs';
import { constants } from 'node:os';
import { ancestorsOf } from '../host/process-ancestors';
import type { Holder, HolderReport } from './stale';
import { PF_EXITING, readBootTimeMs, readProcess, startTimeMsOf } from '../host/procfs';
import { DEFAULT_KILL_GRACE_MS } from './gate-defaults';
import { ConfigError } from '../config-error';
import { loadBinding } from '../nvml/binding';

/** The signals reapStale sends. */
export type ReapSignal = 'SIGTERM' | 'SIGKILL';

/** What reapStale did (or would do) with one holder. */
export interface ReapAction {
  pid: number;
  /** The last signal sent, or null when none was. */
  signal: ReapSignal | null;
  /** Every signal sent, in order (recorded the moment each was sent). */
  sent: ReapSignal[];
  result: 'signalled' | 'exited' | 'skipped' | 'would-signal' | 'no-permission';
  reason: string;
}

/** Options of reapStale. */
export interface ReapOptions {
  /** Say what would be signalled; signal nothing. */
  dryRun?: boolean;
  /** Milliseconds between SIGTERM and SIGKILL (default DEFAULT_KILL_GRACE_MS, 10 s). */
  graceMs?: number;
  /** Default /proc. */
  procRoot?: string;
  /** The caller's pid (default process.pid). */
  selfPid?: number;
  /**
   * Hold each target by a pidfd (default true). false, or the environment variable
   * GPUGATE_NO_PIDFD=1 (meant for tests of the fall-back), takes the path used where the kernel
   * has no pidfds: the identity is re-read before each signal.
   */
  pidfd?: boolean;
  /**
   * Called every time an action is recorded or changes (the same object each time for one pid):
   * a signal is reported the moment it is sent, before the grace that follows it.
   */
  onAction?: (action: ReapAction) => void;
  /** Aborting ends the grace at once: no SIGKILL is sent after an abort. */
  signal?: AbortSignal;
}

const POLL_MS = 50;
const ERRNO = constants.errno;

function sleep(ms: number, abort: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      abort?.removeEventListener('abort', done);
      resolve();
    }
    abort?.addEventListener('abort', done, { once: true });
  });
}

/** The system error number of a thrown error (native `errno` number or Node's `code` name). */
function errnoOf(error: unknown): number | null {
  const e = error as { errno?: unknown; code?: unknown };
  if (typeof e.code === 'string' && e.code in ERRNO) return ERRNO[e.code as keyof typeof ERRNO];
  return typeof e.errno === 'number' ? Math.abs(e.errno) : null;
}

type Delivery = 'sent' | 'gone' | 'no-permission' | 'doubt';

/** How one target is addressed: through a pidfd, or by pid after re-verifying its identity. */
interface Handle {
  deliver(signal: ReapSignal | 0): Promise<Delivery>;
  /** Whether the held process still runs (not exited, not a zombie). */
  alive(): Promise<boolean>;
  close(): void;
  /** Why a 'doubt' delivery was refused. */
  doubt: string;
  describe: string;
}

/** The identity a process was judged by: its start time and its cgroup. */
interface Identity {
  pid: number;
  startTime: number;
  cgroup: string | null;
}

type IdentityCheck = { kind: 'same'; zombie: boolean } | { kind: 'gone' } | { kind: 'different'; why: string };

async function checkIdentity(identity: Identity, procRoot: string, bootTimeMs: number): Promise<IdentityCheck> {
  const info = await readProcess(identity.pid, procRoot);
  if (info.kind === 'missing') return { kind: 'gone' };
  if (info.kind === 'unreadable') return { kind: 'different', why: `cannot re-read it: ${info.reason}` };
  const startTime = startTimeMsOf(info.stat, bootTimeMs);
  if (startTime !== identity.startTime) return { kind: 'different', why: `pid ${identity.pid} now started at ${startTime}, not ${identity.startTime}: the pid was reused` };
  if (identity.cgroup !== null && info.cgroup !== identity.cgroup) {
    return { kind: 'different', why: `its cgroup is now ${info.cgroup ?? '(unreadable)'}, not ${identity.cgroup}` };
  }
  return { kind: 'same', zombie: info.stat.state === 'Z' || info.stat.state === 'X' };
}

/** Runs one signal call: ESRCH means the process is gone, EPERM a refusal; anything else throws. */
function sendSignal(send: () => void): Delivery {
  try {
    send();
    return 'sent';
  } catch (error) {
    const errno = errnoOf(error);
    if (errno === ERRNO.ESRCH) return 'gone';
    if (errno === ERRNO.EPERM) return 'no-permission';
    throw error;
  }
}

function killByPid(pid: number, signal: ReapSignal | 0): Delivery {
  return sendSignal(() => process.kill(pid, signal));
}

/** Fall-back: every delivery re-reads start time and cgroup first and refuses on any doubt. */
function verifyingHandle(identity: Identity, procRoot: string, bootTimeMs: number, why: string): Handle {
  const handle: Handle = {
    doubt: '',
    describe: `no pidfd (${why}): identity re-verified before each signal`,
    async deliver(signal) {
      const check = await checkIdentity(identity, procRoot, bootTimeMs);
      if (check.kind === 'gone') return 'gone';
      if (check.kind === 'different') {
        handle.doubt = check.why;
        return 'doubt';
      }
      return killByPid(identity.pid, signal);
    },
    async alive() {
      const check = await checkIdentity(identity, procRoot, bootTimeMs);
      return check.kind === 'same' && !check.zombie;
    },
    close() {},
  };
  return handle;
}

interface PidfdCalls {
  pidfdOpen(pid: number): number;
  pidfdSendSignal(fd: number, signal: number): void;
}

/** pidfd_open and pidfd_send_signal from the addon, or why they cannot be used. */
function pidfdCalls(wanted: boolean): PidfdCalls | string {
  if (!wanted) return 'disabled (GPUGATE_NO_PIDFD=1 or pidfd: false)';
  try {
    return loadBinding();
  } catch (error) {
    return `the native addon did not load: ${error instanceof Error ? error.message : String(error)}`;
  }
}

function pidfdHandle(calls: PidfdCalls, fd: number, identity: Identity, procRoot: string, bootTimeMs: number): Handle {
  let open = true;
  return {
    doubt: '',
    describe: 'held by a pidfd from before the first signal',
    async deliver(signal) {
      return sendSignal(() => calls.pidfdSendSignal(fd, signal === 0 ? 0 : constants.signals[signal]));
    },
    async alive() {
      if ((await this.deliver(0)) === 'gone') return false;
      // Still attached to its pid: the /proc entry is the held process (a zombie until reaped).
      const check = await checkIdentity(identity, procRoot, bootTimeMs);
      return check.kind === 'same' && !check.zombie;
    },
    close() {
      if (open) closeSync(fd);
      open = false;
    },
  };
}

/** What opening a handle on a verified leftover gave. */
type Opened = { kind: 'handle'; handle: Handle } | { kind: 'gone' } | { kind: 'skip'; reason: string };

async function openHandle(identity: Identity, calls: PidfdCalls | string, procRoot: string, bootTimeMs: number): Promise<Opened> {
  if (typeof calls === 'string') return { kind: 'handle', handle: verifyingHandle(identity, procRoot, bootTimeMs, calls) };
  let fd: number;
  try {
    fd = calls.pidfdOpen(identity.pid);
  } catch (error) {
    const errno = errnoOf(error);
    if (errno === ERRNO.ESRCH) return { kind: 'gone' };
    if (errno === ERRNO.ENOSYS) return { kind: 'handle', handle: verifyingHandle(identity, procRoot, bootTimeMs, 'pidfd_open: ENOSYS, the kernel is older than 5.3') };
    return { kind: 'skip', reason: `cannot hold it: ${error instanceof Error ? error.message : String(error)}` };
  }
  // The descriptor names whatever process had the pid at pidfd_open: prove it is the judged one.
  const check = await checkIdentity(identity, procRoot, bootTimeMs);
  if (check.kind !== 'same' || check.zombie) {
    closeSync(fd);
    if (check.kind === 'different') return { kind: 'skip', reason: `${check.why}: never signalled` };
    return { kind: 'gone' };
  }
  return { kind: 'handle', handle: pidfdHandle(calls, fd, identity, procRoot, bootTimeMs) };
}

/** Why a leftover is not signalled at all (before any handle is opened), or null. */
async function precheck(holder: Holder, protectedPids: Set<number>, selfPid: number, procRoot: string, bootTimeMs: number | null): Promise<{ result: 'skipped' | 'exited'; reason: string } | null> {
  if (holder.class !== 'leftover') return { result: 'skipped', reason: `class ${holder.class} (${holder.reason}): only leftovers of an earlier attempt of this service are signalled` };
  if (!Number.isSafeInteger(holder.pid) || holder.pid <= 1) return { result: 'skipped', reason: 'PID 1 (or an invalid pid) is never signalled' };
  if (protectedPids.has(holder.pid)) return { result: 'skipped', reason: holder.pid === selfPid ? 'the caller itself' : 'an ancestor of the caller' };
  const info = await readProcess(holder.pid, procRoot);
  if (info.kind === 'missing') return { result: 'exited', reason: 'already gone' };
  if (info.kind === 'unreadable') return { result: 'skipped', reason: `cannot re-check it: ${info.reason}` };
  if (info.stat.state === 'Z' || info.stat.state === 'X') return { result: 'exited', reason: 'already exited (zombie)' };
  if (info.stat.state === 'D' || (info.stat.flags & PF_EXITING) !== 0) return { result: 'skipped', reason: 'draining (state D or exiting): waited for, never signalled' };
  if (holder.startTime === null || bootTimeMs === null) return { result: 'skipped', reason: 'its start time is unknown, so its identity cannot be proven at the moment of a signal: never signalled' };
  if (startTimeMsOf(info.stat, bootTimeMs) !== holder.startTime) return { result: 'skipped', reason: 'its start time differs from the classified holder: the pid was reused' };
  if (holder.cgroup !== null && info.cgroup !== holder.cgroup) return { result: 'skipped', reason: `its cgroup changed (${info.cgroup ?? 'unreadable'}, classified in ${holder.cgroup}): never signalled` };
  return null;
}

/**
 * Signals the report's 'leftover' holders and returns one action per holder. Each leftover is
 * re-read first: it is skipped when it is PID 1, the caller or an ancestor, now draining (state D
 * or exiting), already gone, or no longer the process that was classified (start time, cgroup).
 */
export async function reapStale(report: HolderReport, options: ReapOptions = {}): Promise<ReapAction[]> {
  const procRoot = options.procRoot ?? '/proc';
  const selfPid = options.selfPid ?? process.pid;
  const graceMs = options.graceMs ?? DEFAULT_KILL_GRACE_MS;
  if (!Number.isFinite(graceMs) || graceMs < 0) throw new ConfigError('graceMs', `option graceMs must be a number of milliseconds >= 0, got ${String(graceMs)}`);
  const protectedPids = new Set([1, selfPid, ...(await ancestorsOf(selfPid, procRoot))]);
  const bootTimeMs = await readBootTimeMs(procRoot);
  const actions: ReapAction[] = [];
  const record = (action: ReapAction): ReapAction => {
    actions.push(action);
    options.onAction?.(action);
    return action;
  };
  const update = (action: ReapAction, change: Partial<ReapAction>): void => {
    Object.assign(action, change);
    options.onAction?.(action);
  };
  const calls = options.dryRun ? 'dry run' : pidfdCalls((options.pidfd ?? true) && process.env['GPUGATE_NO_PIDFD'] !== '1');
  const held: Array<{ action: ReapAction; handle: Handle }> = [];

  for (const holder of report.holders) {
    const refused = await precheck(holder, protectedPids, selfPid, procRoot, bootTimeMs);
    if (refused !== null) {
      record({ pid: holder.pid, signal: null, sent: [], ...refused });
      continue;
    }
    if (options.dryRun) {
      record({ pid: holder.pid, signal: 'SIGTERM', sent: [], result: 'would-signal', reason: `dry run: would send SIGTERM, then SIGKILL after ${graceMs} ms` });
      continue;
    }
    const identity: Identity = { pid: holder.pid, startTime: holder.startTime!, cgroup: holder.cgroup };
    const opened = await openHandle(identity, calls, procRoot, bootTimeMs!);
    if (opened.kind === 'gone') record({ pid: holder.pid, signal: null, sent: [], result: 'exited', reason: 'exited before it was signalled' });
    else if (opened.kind === 'skip') record({ pid: holder.pid, signal: null, sent: [], result: 'skipped', reason: opened.reason });
    else held.push({ action: { pid: holder.pid, signal: null, sent: [], result: 'skipped', reason: '' }, handle: opened.handle });
  }

  // SIGTERM every leftover first, then share one grace period. Every pidfd is closed at the end.
  try {
    const termed: typeof held = [];
    for (const entry of held) {
      const { action, handle } = entry;
      const delivery = await handle.deliver('SIGTERM');
      if (delivery === 'sent') {
        record(Object.assign(action, { signal: 'SIGTERM', sent: ['SIGTERM'], result: 'signalled', reason: `SIGTERM sent (${handle.describe}); SIGKILL after ${graceMs} ms if still alive` } satisfies Partial<ReapAction>));
        termed.push(entry);
      } else if (delivery === 'gone') {
        record(Object.assign(action, { result: 'exited', reason: 'exited before it was signalled' } satisfies Partial<ReapAction>));
      } else if (delivery === 'no-permission') {
        record(Object.assign(action, { result: 'no-permission', reason: 'SIGTERM refused (EPERM)' } satisfies Partial<ReapAction>));
      } else {
        record(Object.assign(action, { result: 'skipped', reason: `${handle.doubt}: SIGTERM not sent` } satisfies Partial<ReapAction>));
      }
    }
    await Promise.all(termed.map(({ action, handle }) => graceThenKill(action, handle, graceMs, options.signal, update)));
  } finally {
    for (const { handle } of held) handle.close();
  }
  return actions;
}

async function graceThenKill(action: ReapAction, handle: Handle, graceMs: number, abort: AbortSignal | undefined, update: (action: ReapAction, change: Partial<ReapAction>) => void): Promise<void> {
  const deadline = Date.now() + graceMs;
  for (;;) {
    if (!(await handle.alive())) {
      update(action, { result: 'exited', reason: 'exited after SIGTERM' });
      return;
    }
    if (abort?.aborted) {
      update(action, { reason: 'SIGTERM sent; interrupted during the grace: SIGKILL not sent' });
      return;
    }
    if (Date.now() >= deadline) break;
    await sleep(Math.min(POLL_MS, Math.max(1, deadline - Date.now())), abort);
  }
  const delivery = await handle.deliver('SIGKILL');
  if (delivery === 'sent') update(action, { signal: 'SIGKILL', sent: [...action.sent, 'SIGKILL'], result: 'signalled', reason: `still alive ${graceMs} ms after SIGTERM (${handle.describe})` });
  else if (delivery === 'gone') update(action, { result: 'exited', reason: `exited after SIGTERM (just after the ${graceMs} ms grace)` });
  else if (delivery === 'no-permission') update(action, { result: 'no-permission', reason: 'SIGKILL refused (EPERM)' });
  else update(action, { result: 'exited', reason: `exited during the grace; ${handle.doubt}: SIGKILL not sent` });
}
