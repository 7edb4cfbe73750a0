/**
 * GpuWaitTimeoutError: waitForGpusFree ran out of time. It carries the last evaluation, and its
 * message says per GPU what failed (memory, processes, stability, a read error) and who holds it,
 * in the words of failure-text.ts. The CLI maps it to exit code 75.
 */
import type { Evaluation } from './evaluation';
import { describeFailures } from './failure-text';
import { ErrorCode, GpugateError } from '../gpugate-error';
import { formatDuration } from '../units';

/** Rejection of waitForGpusFree when timeoutMs passes before every GPU is free and stable. */
export class GpuWaitTimeoutError extends GpugateError {
  override readonly name = 'GpuWaitTimeoutError';
  declare readonly code: typeof ErrorCode.waitTimeout;
  /** The last evaluation, or null when no poll completed in time. */
  readonly evaluation: Evaluation | null;
  /** The timeout that passed. */
  readonly timeoutMs: number;

  constructor(timeoutMs: number, evaluation: Evaluation | null, options?: ErrorOptions) {
    const detail = evaluation === null ? 'no poll completed' : describeFailures(evaluation.devices);
    super(ErrorCode.waitTimeout, `GPUs not free after ${formatDuration(timeoutMs)}: ${detail}`, options);
    this.evaluation = evaluation;
    this.timeoutMs = timeoutMs;
  }
}
