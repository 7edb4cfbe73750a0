/**
 * The backstop over a session's own call deadline: the session ends every NVML call after
 * callTimeoutMs itself, so a caller waits a little longer than that and then stops waiting for
 * the session (one that never settles still ends the caller). The slack, and the error a caller
 * gets when the backstop fires, are declared here once.
 */

import { MAX_DURATION_MS } from '../units';
import { GPUGATE_TIMEOUT, NvmlError } from './nvml-error';

/** Slack on top of the NVML call deadline before a caller stops waiting for the session itself. */
export const CALL_BACKSTOP_SLACK_MS = 750;

/**
 * Settles with `promise`, or rejects once `callTimeoutMs` plus the slack has passed with the
 * documented "NVML did not answer" error: an NvmlError with code GPUGATE_TIMEOUT. `what` names
 * the call; `setting` names where the caller set callTimeoutMs (`--nvml-timeout`, `callTimeoutMs`).
 */
export function withCallBackstop<T>(promise: Promise<T>, callTimeoutMs: number, what: string, setting: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const backstop = new Promise<never>((_, reject) => {
    // Never past the longest delay a timer holds (a longer one would fire at once).
    timer = setTimeout(
      () => reject(new NvmlError({ code: GPUGATE_TIMEOUT, nvmlReturn: null, fn: what, message: `${what}: NVML did not answer within ${callTimeoutMs} ms (${setting}); the driver may be hung` })),
      Math.min(callTimeoutMs + CALL_BACKSTOP_SLACK_MS, MAX_DURATION_MS),
    );
    timer.unref();
  });
  return Promise.race([promise, backstop]).finally(() => clearTimeout(timer));
}
