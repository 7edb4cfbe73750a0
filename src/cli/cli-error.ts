/**
 * An error raised by the command layer itself, carrying the exit code it ends with
 * (e.g. 77 when `--kill-stale` was refused by the kernel, 75 when `--stale fail` found stale holders).
 */

import { ErrorCode, GpugateError } from '../gpugate-error';
import type { ExitCodeValue } from './exit-code-table';

/** A failure decided by the CLI, with its exit code and a one-line reason. */
export class CliError extends GpugateError {
  override readonly name = 'CliError';
  declare readonly code: typeof ErrorCode.command;
  /** The code the command exits with. */
  readonly exitCode: ExitCodeValue;
  /** Short machine-readable result word for `--json` (e.g. 'no-permission'). */
  readonly result: string;

  constructor(message: string, exitCode: ExitCodeValue, result: string, options?: ErrorOptions) {
    super(ErrorCode.command, message, options);
    this.exitCode = exitCode;
    this.result = result;
  }
}
