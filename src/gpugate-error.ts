/**
 * GpugateError: the base of every error gpugate raises, and the one list of gpugate's own error
 * codes. Each subclass sets its own `name`, passes one stable `code` (programs compare codes;
 * messages may be reworded), keeps the facts of the failure in readonly fields, and accepts the
 * standard `{ cause }` as its last constructor argument.
 */

import type { NvmlErrorName } from './nvml-return-names';

/**
 * gpugate's own error codes. An {@link NvmlError} for a failed NVML call carries NVML's name for
 * the return value instead ('NVML_ERROR_GPU_IS_LOST', 'NVML_ERROR_<n>').
 */
export const ErrorCode = {
  /** UsageError: a flag, option or environment value could not be parsed. */
  usage: 'GPUGATE_USAGE',
  /** ConfigError: an option of the wrong type or out of range, or options that the GPUs can never meet (a threshold above total memory). */
  config: 'GPUGATE_CONFIG',
  /** DeviceSelectionError: a GPU selector matched nothing, or a UUID prefix matched several. */
  deviceSelection: 'GPUGATE_DEVICE_SELECTION',
  /** GpuWaitTimeoutError: the wait ran out of time. */
  waitTimeout: 'GPUGATE_WAIT_TIMEOUT',
  /**
   * GpuWaitAbortError and the CLI's InterruptedError: the platform's own code for an abort (Node's
   * AbortError carries it too), so code that handles any abort handles these.
   */
  aborted: 'ABORT_ERR',
  /** CliError: a failure decided by the command layer, with its own exit code. */
  command: 'GPUGATE_COMMAND',
  /** NativeLoadError: no build of the addon matches this platform, architecture and runtime. */
  noNativeBuild: 'GPUGATE_NO_NATIVE_BUILD',
  /** SimLibraryNotFoundError: the simulator library is in none of the places searched. */
  simLibraryNotFound: 'GPUGATE_SIM_LIBRARY_NOT_FOUND',
  /** NvmlError: no NVML library could be loaded from any place tried. */
  libraryNotFound: 'GPUGATE_LIBRARY_NOT_FOUND',
  /** NvmlError: an NVML call missed its deadline; the session is poisoned. */
  timeout: 'GPUGATE_TIMEOUT',
  /**
   * DriverStuckError (an NvmlError): an earlier NVML helper is asleep in the kernel (state D) in a
   * call older than the deadline, so every NVML call would hang behind it: refused before opening NVML.
   */
  driverStuck: 'GPUGATE_DRIVER_STUCK',
  /** NvmlError: the session was closed (or poisoned earlier). */
  sessionClosed: 'GPUGATE_SESSION_CLOSED',
  /** NvmlError: a session already holds its limit of pending calls; this one was refused at once (the session is fine). */
  queueFull: 'GPUGATE_QUEUE_FULL',
  /** NvmlError: the addon failed inside one call (e.g. out of memory) and reported it instead of crashing. */
  nativeFailure: 'GPUGATE_NATIVE_FAILURE',
  /** NvmlError: the NVML helper process died (a signal, an abort) while answering a call; the session is closed, the program lives on. */
  nvmlHelperCrashed: 'GPUGATE_NVML_HELPER_CRASHED',
  /** NvmlError: the NVML helper file beside the addon is missing, not a regular file, or writable by another user; it is not run. */
  nvmlHelperMissing: 'GPUGATE_NVML_HELPER_MISSING',
  /** NvmlError: a memory reading whose numbers do not add up: the GPU cannot be judged. */
  memoryImplausible: 'GPUGATE_MEMORY_IMPLAUSIBLE',
  /**
   * NvmlError: a selected MIG instance reports the whole GPU's memory as its own (as NVML can
   * inside a container): its free memory cannot be judged where gpugate runs, and waiting cannot help.
   */
  memoryUnjudgeable: 'GPUGATE_MEMORY_UNJUDGEABLE',
  /**
   * NvmlError: a selected GPU's driver names a recovery action (reset, reboot, drain…, NVML's
   * field 230, Xid 154): it will not free up by waiting; the operator must act.
   */
  recoveryRequired: 'GPUGATE_RECOVERY_REQUIRED',
  /** SystemdUnavailableError: systemctl could not be asked (not installed, systemd not running, no answer in time). */
  systemdUnavailable: 'GPUGATE_SYSTEMD_UNAVAILABLE',
  /** ForeignFileError: a file gpugate was to replace is not one it wrote (or changed meanwhile): left alone. */
  foreignFile: 'GPUGATE_FOREIGN_FILE',
  /** UnsafePathError: gpugate refused to write through a path (a symbolic link, a directory another user may change, a FIFO, a file of another owner). */
  unsafePath: 'GPUGATE_UNSAFE_PATH',
  /** FileSystemError: the OS denied a file operation (EACCES, EPERM). */
  fileAccess: 'GPUGATE_FILE_ACCESS',
  /** FileSystemError: the OS failed a file operation (ENOSPC, EROFS, EIO…; the errno is in `errno` and the message). */
  fileSystem: 'GPUGATE_FILE_SYSTEM',
  /** GpuLeaseError: another `gpugate select` held the lease directory's lock too long. */
  leaseLockTimeout: 'GPUGATE_LEASE_LOCK_TIMEOUT',
  /** GpuLeaseError: the lease's holder pid names no running process (it is gone, or a zombie). */
  leaseHolderGone: 'GPUGATE_LEASE_HOLDER_GONE',
  /** GpuLeaseError: a lease with a duration, but the boot clock it is measured on cannot be read. */
  leaseClockUnreadable: 'GPUGATE_LEASE_CLOCK_UNREADABLE',
  /** GpuLeaseError: a lease bound only to a process whose pid the host cannot check (gpugate reads a nested PID namespace's /proc); give it a duration. */
  leaseNamespace: 'GPUGATE_LEASE_NAMESPACE',
} as const;

/** One of gpugate's own error codes. */
export type GpugateErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/**
 * The base of gpugate's errors: `instanceof GpugateError` holds for each of them. Abstract: every
 * error is one of its classes, each of which narrows `code` to its own literal codes.
 */
export abstract class GpugateError extends Error {
  override name = 'GpugateError';
  /** Stable code for programs: one of {@link ErrorCode}, or (an NvmlError) NVML's name for a failed call. */
  readonly code: GpugateErrorCode | NvmlErrorName;

  constructor(code: GpugateErrorCode | NvmlErrorName, message: string, options?: ErrorOptions) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
  }
}
