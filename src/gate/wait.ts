/**
 * waitForGpusFree and checkGpusOnce: gate() without the stale scan, for a caller that wants a
 * promise that resolves when the GPUs are free and rejects otherwise. Same options (less the stale
 * policy and actions), same checks, same defaults (gateDefaults); gate()'s outcome becomes the
 * resolution or the error.
 */
import { GpuWaitAbortError } from './wait-abort-error';
import { GpuWaitTimeoutError } from './wait-timeout-error';
import type { Evaluation } from './evaluation';
import { gate } from './gate';
import { gateDefaults } from './gate-defaults';
import type { WaitOptions, WaitResult } from './gate-options';
import type { GateOutcome } from './gate-outcome';
import { checkWaitOptions } from './option-check';

export type { GpuFailureReason, GpuEvaluation, Evaluation } from './evaluation';
export type { WaitOptions, WaitResult } from './gate-options';
export { GpuWaitAbortError } from './wait-abort-error';
/** Time between polls when intervalMs is not given (gateDefaults.intervalMs). */
export { DEFAULT_INTERVAL_MS } from './gate-defaults';

/** gate() as a wait or a check of `options`, with no stale scan; holders are classified unless inspectHolders is false. */
function gateWithoutScan(options: WaitOptions, mode: 'wait' | 'check'): Promise<GateOutcome> {
  return gate({ ...options, mode, stale: 'ignore', inspectHolders: options.inspectHolders ?? true });
}

/** The error that stands for an outcome that is neither ready nor busy. */
function errorOf(outcome: GateOutcome, options: WaitOptions): Error {
  if (outcome.result === 'timeout') return new GpuWaitTimeoutError(options.timeoutMs ?? gateDefaults.timeoutMs, outcome.evaluation);
  if (outcome.result === 'interrupted') return new GpuWaitAbortError(outcome.evaluation, options.signal?.reason);
  return outcome.error ?? new Error(`internal error: gate ended '${outcome.result}' without an error: ${outcome.reason}`);
}

/**
 * One sample of the selected GPUs against the criteria, without stability (for `gpugate check`).
 * Resolves with the evaluation whether or not the GPUs are free; rejects with ConfigError,
 * DeviceSelectionError or NvmlError (a ConfigError or UsageError for a bad option).
 */
export async function checkGpusOnce(options: WaitOptions = {}): Promise<Evaluation> {
  checkWaitOptions('checkGpusOnce', options);
  const outcome = await gateWithoutScan(options, 'check');
  if ((outcome.result === 'ready' || outcome.result === 'busy') && outcome.evaluation !== null) return outcome.evaluation;
  throw errorOf(outcome, options);
}

/**
 * Waits until every selected GPU meets the criteria and its free memory has been stable for
 * stableMs (default gateDefaults: 3 s stable, 500 ms between polls, 120 s timeout; `timeoutMs:
 * Infinity` waits without end). Resolves with { elapsedMs, polls, devices, evaluation }. Rejects
 * with GpuWaitTimeoutError after timeoutMs, GpuWaitAbortError (name 'AbortError') when `signal`
 * aborts, the NvmlError at once on a fatal NVML condition, ConfigError for impossible criteria, a
 * duration above MAX_DURATION_MS or an unknown option, DeviceSelectionError when a selector matches
 * nothing. Many waiters on one session share one poll per interval; a poll reads memory, and
 * process lists and the compute mode only where the decision needs them.
 */
export async function waitForGpusFree(options: WaitOptions = {}): Promise<WaitResult> {
  checkWaitOptions('waitForGpusFree', options);
  if (options.signal?.aborted) throw new GpuWaitAbortError(null, options.signal.reason);
  const outcome = await gateWithoutScan(options, 'wait');
  const evaluation = outcome.evaluation;
  if (outcome.result !== 'ready' || evaluation === null) throw errorOf(outcome, options);
  return { elapsedMs: evaluation.elapsedMs, polls: evaluation.polls, devices: evaluation.devices, evaluation };
}
