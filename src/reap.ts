/**
 * reapStale: signals the holders proven to be leftovers of this service (class 'leftover'):
 * SIGTERM, then SIGKILL after a grace period if still alive. Never PID 1, the caller, its
 * ancestors, a draining task, or a pid whose start time no longer matches (pid reuse). Every
 * other holder is reported as skipped with the reason. dryRun signals nothing.
 */
import { ancestorsOf, type HolderReport } from './stale';
import * as path from 'node:path';
import { CLOCK_TICKS_PER_SECOND, PF_EXITING, parseBootTime, readProcText, readProcess } from './procfs';

/** What reapStale did (or would do) with one holder. */
export interface ReapAction {
  pid: number;
  /** The last signal sent, or null when none was. */
  signal: 'SIGTERM' | 'SIGKILL' | null;
  result: 'signalled' | 'exited' | 'skipped' | 'would-signal' | 'no-permission';
  reason: string;
}

/** Options of reapStale. */
export interface ReapOptions {
  /** Say what would be signalled; signal nothing. */
  dryRun?: boolean;
  /** Milliseconds between SIGTERM and SIGKILL (default 5000). */
  graceMs?: number;
  /** Default /proc. */
  procRoot?: string;
  /** The caller's pid (default process.pid). */
  selfPid?: number;
}

const POLL_MS = 50;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

type SignalOutcome = 'sent' | 'gone' | 'no-permission';

function send(pid: number, signal: NodeJS.Signals): SignalOutcome {
  try {
    process.kill(pid, signal);
    return 'sent';
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ESRCH') return 'gone';
    if (code === 'EPERM') return 'no-permission';
    throw error;
  }
}

async function isAlive(pid: number, procRoot: string): Promise<boolean> {
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
  const info = await readProcess(pid, procRoot);
  if (info.kind === 'missing') return false;
  return !(info.kind === 'ok' && (info.stat.state === 'Z' || info.stat.state === 'X'));
}

async function waitForExit(pid: number, procRoot: string, graceMs: number): Promise<boolean> {
  const deadline = Date.now() + graceMs;
  for (;;) {
    if (!(await isAlive(pid, procRoot))) return true;
    if (Date.now() >= deadline) return false;
    await sleep(Math.min(POLL_MS, Math.max(1, deadline - Date.now())));
  }
}

/**
 * Signals the report's 'leftover' holders and returns one action per holder. Each leftover is
 * re-read first: it is skipped when it is PID 1, the caller or an ancestor, now draining (state D
 * or exiting), already gone, or started at a different time than when it was classified.
 */
export async function reapStale(report: HolderReport, options: ReapOptions = {}): Promise<ReapAction[]> {
  const procRoot = options.procRoot ?? '/proc';
  const selfPid = options.selfPid ?? process.pid;
  const graceMs = options.graceMs ?? 5000;
  if (!Number.isFinite(graceMs) || graceMs < 0) throw new TypeError(`graceMs must be a number of milliseconds >= 0, got ${String(graceMs)}`);
  const protectedPids = new Set([1, selfPid, ...(await ancestorsOf(selfPid, procRoot))]);
  const procStat = await readProcText(path.join(procRoot, 'stat'));
  const bootSeconds = procStat.kind === 'ok' ? parseBootTime(procStat.text) : null;
  const bootTimeMs = bootSeconds === null ? null : bootSeconds * 1000;
  const actions: ReapAction[] = [];
  const toSignal: Array<{ pid: number }> = [];

  for (const holder of report.holders) {
    const skip = (reason: string): void => {
      actions.push({ pid: holder.pid, signal: null, result: 'skipped', reason });
    };
    if (holder.class !== 'leftover') {
      skip(`class ${holder.class}: only leftovers of this service are signalled`);
      continue;
    }
    if (!Number.isSafeInteger(holder.pid) || holder.pid <= 1) {
      skip('PID 1 (or an invalid pid) is never signalled');
      continue;
    }
    if (protectedPids.has(holder.pid)) {
      skip(holder.pid === selfPid ? 'the caller itself' : 'an ancestor of the caller');
      continue;
    }
    const info = await readProcess(holder.pid, procRoot);
    if (info.kind === 'missing') {
      actions.push({ pid: holder.pid, signal: null, result: 'exited', reason: 'already gone' });
      continue;
    }
    if (info.kind === 'unreadable') {
      skip(`cannot re-check it: ${info.reason}`);
      continue;
    }
    if (info.stat.state === 'Z' || info.stat.state === 'X') {
      actions.push({ pid: holder.pid, signal: null, result: 'exited', reason: 'already exited (zombie)' });
      continue;
    }
    if (info.stat.state === 'D' || (info.stat.flags & PF_EXITING) !== 0) {
      skip('draining (state D or exiting): waited for, never signalled');
      continue;
    }
    if (holder.startTime !== null && bootTimeMs !== null) {
      const startTime = Math.round(bootTimeMs + (info.stat.startTimeTicks * 1000) / CLOCK_TICKS_PER_SECOND);
      if (startTime !== holder.startTime) {
        skip('its start time differs from the classified holder: the pid was reused');
        continue;
      }
    }
    if (options.dryRun) {
      actions.push({ pid: holder.pid, signal: 'SIGTERM', result: 'would-signal', reason: `dry run: would send SIGTERM, then SIGKILL after ${graceMs} ms` });
      continue;
    }
    toSignal.push({ pid: holder.pid });
  }

  // SIGTERM every leftover first, then share one grace period.
  const termed: number[] = [];
  for (const { pid } of toSignal) {
    const outcome = send(pid, 'SIGTERM');
    if (outcome === 'gone') actions.push({ pid, signal: null, result: 'exited', reason: 'exited before it was signalled' });
    else if (outcome === 'no-permission') actions.push({ pid, signal: null, result: 'no-permission', reason: 'SIGTERM refused (EPERM)' });
    else termed.push(pid);
  }
  await Promise.all(
    termed.map(async (pid) => {
      if (await waitForExit(pid, procRoot, graceMs)) {
        actions.push({ pid, signal: 'SIGTERM', result: 'exited', reason: 'exited after SIGTERM' });
        return;
      }
      const outcome = send(pid, 'SIGKILL');
      if (outcome === 'gone') actions.push({ pid, signal: 'SIGTERM', result: 'exited', reason: `exited after SIGTERM (just after the ${graceMs} ms grace)` });
      else if (outcome === 'no-permission') actions.push({ pid, signal: 'SIGTERM', result: 'no-permission', reason: 'SIGKILL refused (EPERM)' });
      else actions.push({ pid, signal: 'SIGKILL', result: 'signalled', reason: `still alive ${graceMs} ms after SIGTERM` });
    }),
  );
  return actions;
}
