/**
 * The poll loop of a prepared wait: joins the session's shared poll, evaluates each read (one at
 * a time, the newest first), reads a busy GPU's lists again when its memory moved, confirms a
 * "free" that rests on carried-over fields, and settles on success, the timeout, an abort or a
 * fatal NVML condition.
 */
import { monotonicMs } from '../monotonic-clock';
import type { NvmlSession, Snapshot } from '../types';
import { evaluateRead, type EvaluatedRead, type Evaluation, type WaitState } from './evaluation';
import { SnapshotPoller, type PollResult, type ReadPlan } from './poller';
import { confirmingPlan, holdersPlan, needsConfirmation, nextReadPlan } from './read-plan';
import { GpuWaitAbortError } from './wait-abort-error';
import { GpuWaitTimeoutError } from './wait-timeout-error';
import type { WaitResult } from './gate-options';

/** How {@link pollUntilFree} runs. */
export interface PollLoopOptions {
  intervalMs: number;
  /** Counted from state.startMs; undefined or Infinity: no timeout. */
  timeoutMs?: number;
  signal?: AbortSignal;
  onPoll?: (evaluation: Evaluation) => void;
  /** The first read, taken by the caller: evaluated as poll 1 before the shared poll starts. */
  first?: { snapshot: Snapshot; receivedAtMs: number };
  /**
   * Decides whether an evaluation ends the loop (default: every selected GPU ok). Offered one
   * evaluation at a time, the newest when several arrived meanwhile; one in flight when the
   * timeout or the abort comes is still decided, and a true answer then wins.
   */
  accept?: (evaluation: Evaluation) => boolean | Promise<boolean>;
}

/**
 * The poll loop of a prepared wait: resolves once every selected GPU is free and stable, rejects
 * with GpuWaitTimeoutError after `timeoutMs` (counted from state.startMs), GpuWaitAbortError
 * when `signal` aborts, the NvmlError at once on a fatal NVML condition. Polls are shared with
 * every other waiter of the session at the same interval.
 */
export function pollUntilFree(session: NvmlSession, state: WaitState, options: PollLoopOptions): Promise<WaitResult> {
  const poller = SnapshotPoller.for(session, options.intervalMs);
  return new Promise<WaitResult>((resolve, reject) => {
    let settled = false;
    let busy = false;
    let pending: PollResult | null = null;
    let timer: NodeJS.Timeout | null = null;
    let unsubscribe: () => void = () => {};
    const accept = options.accept;
    let accepting = false;
    /** A timeout or abort that came while `accept` was deciding: settles once it declines. */
    let stopping: (() => void) | null = null;
    const stop = (settle: () => void): void => {
      if (accepting) stopping ??= settle;
      else finish(settle);
    };

    const onAbort = (): void => stop(() => reject(new GpuWaitAbortError(state.last, options.signal?.reason)));
    const finish = (settle: () => void): void => {
      if (settled) return;
      settled = true;
      unsubscribe();
      if (timer !== null) clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      settle();
    };
    const succeed = (evaluation: Evaluation): void =>
      finish(() => resolve({ elapsedMs: evaluation.elapsedMs, polls: evaluation.polls, devices: evaluation.devices, evaluation }));

    /** Reads again per `plan` and evaluates that read as the same poll; null when the loop settled meanwhile. */
    const reread = async (plan: ReadPlan, polls: number, read: EvaluatedRead): Promise<EvaluatedRead | null> => {
      const again = await poller.refine(state.selection.indices, plan);
      if (settled) return null;
      if (again.kind === 'error') {
        const error = again.error;
        finish(() => reject(error));
        return null;
      }
      const evaluated = (await evaluateRead(again.snapshot, again.plan, again.receivedAtMs, state, true, polls)) ?? read;
      return settled ? null : evaluated;
    };

    /**
     * Evaluates one poll (reading a busy GPU's lists again when its memory moved, and confirming a
     * "ready" that rests on carried-over fields); true when the wait is over.
     */
    const evaluate = async (result: Extract<PollResult, { kind: 'snapshot' }>): Promise<boolean> => {
      const polls = state.polls + 1;
      let read = await evaluateRead(result.snapshot, result.plan, result.receivedAtMs, state, true, polls);
      if (read === null || settled) return settled;
      state.polls = polls;
      if (read.holdersOutdated) {
        const current = await reread(holdersPlan(state), polls, read);
        if (current === null) return true;
        read = current;
      }
      if (needsConfirmation(read, accept !== undefined)) {
        const confirmed = await reread(confirmingPlan(state), polls, read);
        if (confirmed === null) return true;
        read = confirmed;
      }
      state.last = read.evaluation;
      options.onPoll?.(read.evaluation);
      if (accept === undefined) {
        if (read.evaluation.ok) succeed(read.evaluation);
        return settled;
      }
      accepting = true;
      let accepted: boolean;
      try {
        accepted = await accept(read.evaluation);
      } finally {
        accepting = false;
      }
      if (accepted) succeed(read.evaluation);
      else if (stopping !== null) finish(stopping);
      return settled;
    };

    const drain = async (): Promise<void> => {
      busy = true;
      while (pending !== null && !settled) {
        const result: PollResult = pending;
        pending = null;
        if (result.kind === 'error') {
          const error = result.error;
          finish(() => reject(error));
          break;
        }
        try {
          if (await evaluate(result)) break;
        } catch (error) {
          finish(() => reject(error));
        }
      }
      busy = false;
    };

    options.signal?.addEventListener('abort', onAbort, { once: true });
    if (options.timeoutMs !== undefined && options.timeoutMs !== Infinity) {
      const timeoutMs = options.timeoutMs;
      timer = setTimeout(() => stop(() => reject(new GpuWaitTimeoutError(timeoutMs, state.last))), Math.max(0, timeoutMs - (monotonicMs() - state.startMs)));
    }
    if (state.units.length === 0) {
      // Nothing selected, and the caller said that is acceptable (allowEmptySelection).
      const evaluation: Evaluation = { elapsedMs: monotonicMs() - state.startMs, polls: 0, ok: true, devices: [], snapshot: { takenAt: Date.now(), devices: [] }, selection: state.selection };
      succeed(evaluation);
      return;
    }
    if (options.signal?.aborted) {
      onAbort();
      return;
    }
    const subscribe = (firstDelayMs: number): void => {
      if (settled) return;
      unsubscribe = poller.subscribe(
        state.selection.indices,
        (result) => {
          pending = result;
          if (!busy) void drain();
        },
        () => nextReadPlan(state, { intervalMs: options.intervalMs, partial: accept !== undefined }),
        firstDelayMs,
      );
    };
    const first = options.first;
    if (first === undefined) {
      subscribe(0);
      return;
    }
    busy = true;
    evaluate({ kind: 'snapshot', snapshot: first.snapshot, plan: confirmingPlan(state), receivedAtMs: first.receivedAtMs, sequence: 0 })
      .then(
        (over) => {
          busy = false;
          if (!over) subscribe(Math.max(0, options.intervalMs - (monotonicMs() - first.receivedAtMs)));
        },
        (error: unknown) => {
          busy = false;
          finish(() => reject(error));
        },
      );
  });
}
