/**
 * The command line's advice for a library error: the library names its own options and no flag,
 * so the commands add which flag helps when they show the error. Errors are told apart by their
 * code alone, so that this file loads nothing but the codes.
 */
import { ErrorCode, GpugateError } from '../gpugate-error';

/** The flags that help with `error`, as a suffix for its message ('' when none); `allowEmpty`: the command has --allow-empty. */
export function cliAdvice(error: unknown, allowEmpty: boolean): string {
  if (!(error instanceof GpugateError)) return '';
  // DeviceSelectionError.emptySelection: a valid selection of no GPU.
  if (error.code === ErrorCode.deviceSelection && (error as { emptySelection?: unknown }).emptySelection === true) {
    return allowEmpty ? ' (--gpus to select GPUs, or --allow-empty to accept none)' : ' (--gpus to select GPUs)';
  }
  if (error.code === ErrorCode.leaseNamespace) return ' (--lease DUR)';
  if (error.code === ErrorCode.timeout) return ' (--nvml-timeout)';
  return '';
}
