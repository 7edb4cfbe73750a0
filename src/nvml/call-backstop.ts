/**
 * The backstop over a session's own call deadline: the session ends every NVML call after
 * callTimeoutMs itself, so a caller waits a little longer than that and then stops waiting for
 * the session (one that never settles still ends the caller). The slack is declared here once.
 */

import { MAX_DURATION_MS } from '../units';

/** Slack on top of the NVML call deadline before a caller stops waiting for the session itself. */
export const CALL_BACKSTOP_SLACK_MS = 750;

/** Settles with `promise`, or rejects with `timeoutError()` once `callTimeoutMs` plus the slack has passed. */
export function withCallBackstop<T>(promise: Promise<T>, callTimeoutMs: number, timeoutError: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const backstop = new Promise<never>((_, reject) => {
    // Never past the longest delay a timer holds (a longer one would fire at once).
    timer = setTimeout(() => reject(timeoutError()), Math.min(callTimeoutMs + CALL_BACKSTOP_SLACK_MS, MAX_DURATION_MS));
    timer.unref();
  });
  return Promise.race([promise, backstop]).finally(() => clearTimeout(timer));
}
