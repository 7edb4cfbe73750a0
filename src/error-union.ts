/**
 * Every error class gpugate raises, as one union type, and the guard that gives it: each class
 * declares its own literal `code`, so on this union `switch (error.code)` narrows to the class
 * (and its fields). `instanceof GpugateError` alone gives the base class, whose `code` narrows
 * nothing but itself.
 */
import type { CliError } from './cli/cli-error';
import type { InterruptedError } from './cli/interrupted-error';
import type { ConfigError } from './config-error';
import type { DeviceSelectionError } from './gate/device-selection-error';
import type { GpuWaitAbortError } from './gate/wait';
import type { GpuWaitTimeoutError } from './gate/wait-timeout-error';
import { GpugateError } from './gpugate-error';
import type { GpuLeaseError } from './host/gpu-lease';
import type { ForeignFileError } from './host/owned-file';
import type { FileSystemError, UnsafePathError } from './host/safe-file';
import type { SystemdUnavailableError } from './host/systemd-unit';
import type { NativeLoadError } from './nvml/native-load-error';
import type { NvmlError } from './nvml/nvml-error';
import type { SimLibraryNotFoundError } from './simulator/sim-library';
import type { UsageError } from './usage-error';

/** Any error gpugate raises (the command layer's own included): a union discriminated by `code`. */
export type AnyGpugateError =
  | UsageError
  | ConfigError
  | DeviceSelectionError
  | GpuWaitTimeoutError
  | GpuWaitAbortError
  | InterruptedError
  | CliError
  | NvmlError
  | NativeLoadError
  | SimLibraryNotFoundError
  | GpuLeaseError
  | UnsafePathError
  | FileSystemError
  | ForeignFileError
  | SystemdUnavailableError;

/** True for an error gpugate raised; the type it gives lets `switch (error.code)` narrow to the class. */
export function isGpugateError(error: unknown): error is AnyGpugateError {
  return error instanceof GpugateError;
}
