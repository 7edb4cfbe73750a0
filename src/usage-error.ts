/**
 * UsageError: a value given by the user (a flag, an option, an environment variable) could not be
 * parsed. The CLI maps it to exit code 64.
 */

import { ErrorCode, GpugateError } from './gpugate-error';

/** Thrown when an input string cannot be parsed; the message names the input and what was expected. */
export class UsageError extends GpugateError {
  override readonly name = 'UsageError';
  declare readonly code: typeof ErrorCode.usage;
  /** The text that was given. */
  readonly input: string;
  /** A short description of what would have been accepted. */
  readonly expected: string;

  constructor(input: string, expected: string, message?: string, options?: ErrorOptions) {
    super(ErrorCode.usage, message ?? `invalid value ${JSON.stringify(input)}: expected ${expected}`, options);
    this.input = input;
    this.expected = expected;
  }
}
