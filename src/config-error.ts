/**
 * ConfigError: an option of a public function of the wrong type or out of its range (a duration
 * above the longest timer), or options that together with what the GPUs report can never be met
 * (a threshold above the GPU's total memory, a fraction outside 0..1). The CLI maps it to exit 78.
 */

import { ErrorCode, GpugateError } from './gpugate-error';

/** Thrown for a bad option or an impossible configuration; waiting could never succeed. */
export class ConfigError extends GpugateError {
  override readonly name = 'ConfigError';
  declare readonly code: typeof ErrorCode.config;
  /** The option at fault, e.g. 'minFree'. */
  readonly option: string;

  constructor(option: string, message: string, options?: ErrorOptions) {
    super(ErrorCode.config, message, options);
    this.option = option;
  }
}
