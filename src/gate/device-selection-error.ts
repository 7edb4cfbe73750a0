/**
 * DeviceSelectionError: a GPU selector (from an option or the environment) matched no device, or
 * a UUID prefix matched several. The CLI maps it to exit code 78.
 */

import { ErrorCode, GpugateError } from '../gpugate-error';

/** Thrown when a selector matches nothing or is ambiguous; the message lists what exists. */
export class DeviceSelectionError extends GpugateError {
  override readonly name = 'DeviceSelectionError';
  declare readonly code: typeof ErrorCode.deviceSelection;
  /** The selector at fault, as given. */
  readonly selector: string;
  /** What could have matched: the candidates of an ambiguous prefix, or every device that exists. */
  readonly available: string[];
  /** True when the selection is valid but holds no GPU (a front end may offer its own way to accept that). */
  readonly emptySelection: boolean;

  constructor(selector: string, available: string[], message: string, options?: ErrorOptions & { emptySelection?: boolean }) {
    super(ErrorCode.deviceSelection, message, options);
    this.selector = selector;
    this.available = available;
    this.emptySelection = options?.emptySelection ?? false;
  }
}
