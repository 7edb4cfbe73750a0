/**
 * The command line's advice for a library error: the library names its own options and no flag,
 * so the commands add which flag helps when they show the error.
 */
import { DeviceSelectionError } from '../gate/device-selection-error';
import { ErrorCode } from '../gpugate-error';
import { GpuLeaseError } from '../host/gpu-lease';

/** The flags that help with `error`, as a suffix for its message ('' when none); `allowEmpty`: the command has --allow-empty. */
export function cliAdvice(error: unknown, allowEmpty: boolean): string {
  if (error instanceof DeviceSelectionError && error.emptySelection) return allowEmpty ? ' (--gpus to select GPUs, or --allow-empty to accept none)' : ' (--gpus to select GPUs)';
  if (error instanceof GpuLeaseError && error.code === ErrorCode.leaseNamespace) return ' (--lease DUR)';
  return '';
}
