/**
 * The one place where `selectGpus` has GPUs evaluated against the criteria: one sample (as
 * `check` takes it) or polls with stability (as `wait` runs them), each evaluation offered to
 * `accept` until it takes one. Acceptance is asynchronous (it takes the lease lock), so
 * evaluations are offered one at a time, the newest first when several arrived meanwhile.
 */
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { DEFAULT_INTERVAL_MS, GpuWaitAbortError, checkGpusOnce, waitForGpusFree, type Evaluation, type WaitOptions } from './wait';
import { GpuWaitTimeoutError } from './wait-timeout-error';

/** How an evaluation run ended. */
export type EvaluationRunEnd =
  | { kind: 'accepted'; evaluation: Evaluation }
  | { kind: 'rejected'; evaluation: Evaluation }
  | { kind: 'timeout'; evaluation: Evaluation | null };

/** Makes `own` follow the caller's abort (AbortSignal.any is newer than Node 20.0); returns the unhook. */
function follow(caller: AbortSignal | undefined, own: AbortController): () => void {
  if (caller === undefined) return () => {};
  const onAbort = (): void => own.abort(caller.reason);
  if (caller.aborted) onAbort();
  else caller.addEventListener('abort', onAbort, { once: true });
  return () => caller.removeEventListener('abort', onAbort);
}

/**
 * Evaluates the selected GPUs once (`poll: false`) or on every poll until `accept` returns true
 * for an evaluation, `timeoutMs` passes, or `signal` aborts (rejecting with GpuWaitAbortError).
 * A wait that sees every GPU acceptable ends by itself; when `accept` still declines (the GPUs
 * are leased to others) polling starts again after one interval, for the time that is left.
 */
export async function evaluateUntilAccepted(options: WaitOptions, poll: boolean, accept: (evaluation: Evaluation) => Promise<boolean>): Promise<EvaluationRunEnd> {
  if (!poll) {
    const evaluation = await checkGpusOnce(options);
    return (await accept(evaluation)) ? { kind: 'accepted', evaluation } : { kind: 'rejected', evaluation };
  }
  const startMs = performance.now();
  let accepted: Evaluation | null = null;
  let last: Evaluation | null = null;
  let failure: { error: unknown } | null = null;
  for (;;) {
    const stop = new AbortController();
    const unhook = follow(options.signal, stop);
    let newest: Evaluation | null = null;
    let pump: Promise<void> | null = null;
    const offer = async (): Promise<void> => {
      while (newest !== null && accepted === null && failure === null) {
        const evaluation: Evaluation = newest;
        newest = null;
        try {
          if (await accept(evaluation)) accepted = evaluation;
        } catch (error) {
          failure = { error };
        }
        if (accepted !== null || failure !== null) stop.abort();
      }
      pump = null;
    };
    const remainingMs = options.timeoutMs === undefined ? undefined : Math.max(0, options.timeoutMs - (performance.now() - startMs));
    let ended: 'resolved' | 'timeout';
    try {
      await waitForGpusFree({
        ...options,
        signal: stop.signal,
        ...(remainingMs !== undefined ? { timeoutMs: remainingMs } : {}),
        onPoll: (evaluation) => {
          last = evaluation;
          options.onPoll?.(evaluation);
          newest = evaluation;
          pump ??= offer();
        },
      });
      ended = 'resolved';
    } catch (error) {
      unhook();
      // Our own stop after an acceptance, not the caller's abort.
      if (error instanceof GpuWaitAbortError && stop.signal.aborted && options.signal?.aborted !== true) ended = 'resolved';
      else if (error instanceof GpuWaitTimeoutError) ended = 'timeout';
      else {
        await (pump as Promise<void> | null);
        if (accepted !== null) return { kind: 'accepted', evaluation: accepted };
        throw (failure as { error: unknown } | null)?.error ?? error;
      }
    }
    unhook();
    // An acceptance in flight when the wait ended still counts: its leases are written.
    await (pump as Promise<void> | null);
    if ((failure as { error: unknown } | null) !== null) throw (failure as unknown as { error: unknown }).error;
    if (accepted !== null) return { kind: 'accepted', evaluation: accepted };
    if (ended === 'timeout') return { kind: 'timeout', evaluation: last };
    const leftMs = options.timeoutMs === undefined ? Number.POSITIVE_INFINITY : options.timeoutMs - (performance.now() - startMs);
    if (leftMs <= 0) return { kind: 'timeout', evaluation: last };
    await sleep(Math.min(options.intervalMs ?? DEFAULT_INTERVAL_MS, leftMs), undefined, options.signal === undefined ? {} : { signal: options.signal }).catch(() => {
      throw new GpuWaitAbortError(last, options.signal?.reason);
    });
  }
}
