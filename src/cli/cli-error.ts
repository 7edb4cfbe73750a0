/**
 * An error raised by the command layer itself, carrying the exit code it ends with
 * (e.g. 77 when `--kill-stale` was refused by the kernel, 75 when `--stale fail` found stale holders).
 */

import type { ExitCodeValue } from './exit-codes';

/** A failure decided by the CLI, with its exit code and a one-line reason. */
export class CliError extends Error {
  override readonly name = 'CliError';
  /** The code the command exits with. */
  readonly exitCode: ExitCodeValue;
  /** Short machine-readable result word for `--json` (e.g. 'no-permission'). */
  readonly result: string;

  constructor(message: string, exitCode: ExitCodeValue, result: string) {
    super(message);
    this.exitCode = exitCode;
    this.result = result;
  }
}
