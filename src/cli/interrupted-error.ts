/**
 * InterruptedError: the reason a command's AbortSignal carries when SIGINT, SIGTERM or SIGHUP
 * interrupts it (src/cli/interrupt-watch.ts raises it; src/cli/exit-codes.ts turns its signal into
 * 130, 143 or 129).
 */
import { ErrorCode, GpugateError } from '../gpugate-error';
import type { InterruptSignal } from './exit-code-table';

/** The reason of an interrupted command's abort; named 'AbortError' like every abort. */
export class InterruptedError extends GpugateError {
  override readonly name = 'AbortError';
  declare readonly code: typeof ErrorCode.aborted;
  /** The signal that interrupted the command. */
  readonly signal: InterruptSignal;

  constructor(signal: InterruptSignal, options?: ErrorOptions) {
    super(ErrorCode.aborted, `interrupted by ${signal}`, options);
    this.signal = signal;
  }
}
