/**
 * ConfigError: the options parse, but together with what the GPUs report they cannot ever be met
 * (a threshold above the GPU's total memory, a fraction outside 0..1). The CLI maps it to exit 78.
 */

/** Thrown for an impossible configuration; waiting could never succeed. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  /** The option at fault, e.g. 'minFree'. */
  readonly option: string;

  constructor(option: string, message: string) {
    super(message);
    this.option = option;
  }
}
