/** GpuWaitAbortError: the signal of a wait aborted it. */
import { ErrorCode, GpugateError } from '../gpugate-error';
import type { Evaluation } from './evaluation';

/**
 * Rejection of waitForGpusFree when its signal aborts; carries the last evaluation if any, and the
 * signal's reason as its `cause`. Named 'AbortError' like every abort on the platform.
 */
export class GpuWaitAbortError extends GpugateError {
  override readonly name = 'AbortError';
  declare readonly code: typeof ErrorCode.aborted;
  readonly evaluation: Evaluation | null;

  constructor(evaluation: Evaluation | null, reason?: unknown) {
    super(ErrorCode.aborted, `waiting for GPUs was aborted${reason instanceof Error ? `: ${reason.message}` : ''}`, { cause: reason });
    this.evaluation = evaluation;
  }
}

