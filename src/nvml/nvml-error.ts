/**
 * NvmlError: every failure of the NVML layer, with a stable `code` and an actionable message.
 */
import * as fs from 'node:fs';
import { ErrorCode, GpugateError } from '../gpugate-error';
import { NVML_RETURN_NAMES, type NvmlErrorName, type NvmlReturnName } from '../nvml-return-names';

export type { NvmlErrorName, NvmlReturnName } from '../nvml-return-names';


/** gpugate's own codes of the NVML layer (no NVML return value behind them); see {@link ErrorCode}. */
export const GPUGATE_LIBRARY_NOT_FOUND = ErrorCode.libraryNotFound;
/** An NVML call missed its deadline; the session is poisoned. */
export const GPUGATE_TIMEOUT = ErrorCode.timeout;
/** An earlier NVML helper is stuck in the kernel: refused before opening NVML (DriverStuckError). */
export const GPUGATE_DRIVER_STUCK = ErrorCode.driverStuck;
/** The session was closed (or poisoned earlier). */
export const GPUGATE_SESSION_CLOSED = ErrorCode.sessionClosed;
/** A session already holds its limit of pending calls; this one was refused at once (the session is fine). */
export const GPUGATE_QUEUE_FULL = ErrorCode.queueFull;
/** The addon failed inside one call (e.g. out of memory) and reported it instead of crashing. */
export const GPUGATE_NATIVE_FAILURE = ErrorCode.nativeFailure;
/** The NVML helper process died while answering a call (the signal is named); the session is closed. */
export const GPUGATE_NVML_HELPER_CRASHED = ErrorCode.nvmlHelperCrashed;
/** The NVML helper file beside the addon cannot be run (missing, not a regular file, writable by another user). */
export const GPUGATE_NVML_HELPER_MISSING = ErrorCode.nvmlHelperMissing;
/** A memory reading whose numbers do not add up (see implausibleMemory): the GPU cannot be judged. */
export const GPUGATE_MEMORY_IMPLAUSIBLE = ErrorCode.memoryImplausible;
/** A MIG instance that reports the whole GPU's memory as its own: its memory cannot be judged where gpugate runs. */
export const GPUGATE_MEMORY_UNJUDGEABLE = ErrorCode.memoryUnjudgeable;
/** A GPU whose driver names a recovery action (NVML field 230): only the operator's action frees it. */
export const GPUGATE_RECOVERY_REQUIRED = ErrorCode.recoveryRequired;

/** The stable name of an nvmlReturn_t value: 'NVML_ERROR_GPU_IS_LOST', or 'NVML_ERROR_<n>' when unlisted. */
export function nvmlCodeName(nvmlReturn: number): NvmlReturnName {
  return (NVML_RETURN_NAMES as Record<number, NvmlReturnName | undefined>)[nvmlReturn] ?? `NVML_ERROR_${nvmlReturn}`;
}

/** gpugate's own codes of the NVML layer: failures with no NVML return value behind them. */
export type NvmlLayerCode =
  | typeof ErrorCode.libraryNotFound
  | typeof ErrorCode.timeout
  | typeof ErrorCode.driverStuck
  | typeof ErrorCode.sessionClosed
  | typeof ErrorCode.queueFull
  | typeof ErrorCode.nativeFailure
  | typeof ErrorCode.nvmlHelperCrashed
  | typeof ErrorCode.nvmlHelperMissing
  | typeof ErrorCode.memoryImplausible
  | typeof ErrorCode.memoryUnjudgeable
  | typeof ErrorCode.recoveryRequired;

/** The code of an {@link NvmlError}: NVML's name for a failed call, or one of gpugate's codes of the NVML layer. */
export type NvmlErrorCode = NvmlErrorName | NvmlLayerCode;

/** NVML's name for a failed call's return value ('NVML_ERROR_0' if a success ever reached an error: never NVML_SUCCESS). */
export function nvmlErrorName(nvmlReturn: number): NvmlErrorName {
  const name = nvmlCodeName(nvmlReturn);
  return name === 'NVML_SUCCESS' ? 'NVML_ERROR_0' : name;
}

/** Fields of an {@link NvmlError}. */
export interface NvmlErrorOptions {
  code: NvmlErrorCode;
  nvmlReturn: number | null;
  fn: string | null;
  device?: number | null;
  message: string;
  dlerrors?: string[];
  /** For GPUGATE_TIMEOUT in the helper mode: the pid of the NVML helper left behind; for GPUGATE_DRIVER_STUCK: the stuck helper's. */
  helperPid?: number | null;
  cause?: unknown;
}

/** A failure of the NVML layer. `instanceof NvmlError` works; `code` is stable for programs. */
export class NvmlError extends GpugateError {
  override readonly name = 'NvmlError';
  /** 'NVML_ERROR_GPU_IS_LOST', 'NVML_ERROR_<n>', or one of gpugate's own codes ('GPUGATE_TIMEOUT'...). */
  declare readonly code: NvmlErrorCode;
  /** The raw nvmlReturn_t, or null for gpugate's own codes. */
  readonly nvmlReturn: number | null;
  /** The NVML function (exported symbol) or gpugate phase that failed. */
  readonly fn: string | null;
  /** The NVML device index concerned, or null. */
  readonly device: number | null;
  /** For GPUGATE_LIBRARY_NOT_FOUND: every place tried with its dlerror() text. */
  readonly dlerrors?: string[];
  /** GPUGATE_TIMEOUT of a session whose NVML ran in a helper process: that process's pid (it was killed and is reaped when the kernel lets it go); GPUGATE_DRIVER_STUCK: the pid of the earlier helper found stuck; null otherwise. */
  readonly helperPid: number | null;

  constructor(options: NvmlErrorOptions) {
    super(options.code, options.message, { cause: options.cause });
    this.nvmlReturn = options.nvmlReturn;
    this.fn = options.fn;
    this.device = options.device ?? null;
    this.helperPid = options.helperPid ?? null;
    if (options.dlerrors !== undefined) this.dlerrors = options.dlerrors;
  }
}

const FATAL_CODES: ReadonlySet<string> = new Set<NvmlErrorCode>([
  'NVML_ERROR_GPU_IS_LOST',
  'NVML_ERROR_RESET_REQUIRED',
  'NVML_ERROR_GPU_NOT_FOUND',
  'NVML_ERROR_DRIVER_NOT_LOADED',
  'NVML_ERROR_LIB_RM_VERSION_MISMATCH',
  'NVML_ERROR_LIBRARY_NOT_FOUND',
  'NVML_ERROR_FUNCTION_NOT_FOUND',
  'NVML_ERROR_UNINITIALIZED',
  GPUGATE_LIBRARY_NOT_FOUND,
  GPUGATE_TIMEOUT,
  GPUGATE_DRIVER_STUCK,
  GPUGATE_SESSION_CLOSED,
  GPUGATE_NVML_HELPER_CRASHED,
  GPUGATE_NVML_HELPER_MISSING,
]);

/**
 * True when waiting cannot help: a lost GPU or one that needs a reset, no library or driver,
 * a library/driver mismatch, a missing NVML function, a hung NVML call, or a closed session.
 * NO_PERMISSION is not fatal by itself: a MIG parent's memory query needs privileges that its
 * MIG instances' queries do not.
 * Accepts an NvmlError or a {@link FieldError}-like object with a `code`.
 */
export function isFatalNvmlError(error: unknown): error is { code: NvmlErrorCode } {
  if (typeof error !== 'object' || error === null) return false;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && FATAL_CODES.has(code);
}

/** True when this process looks like it runs in a container (Docker, Podman, Kubernetes, systemd-nspawn). */
export function looksLikeContainer(): boolean {
  try {
    if (fs.existsSync('/.dockerenv') || fs.existsSync('/run/.containerenv')) return true;
    if (process.env['container'] !== undefined) return true;
    const cgroup = fs.readFileSync('/proc/1/cgroup', 'utf8');
    return /docker|kubepods|containerd|libpod|lxc/.test(cgroup);
  } catch {
    return false;
  }
}

/**
 * What a user should do about an NVML code, or null when NVML's own text is all there is.
 * `atInit` selects the advice for codes that mean something else during nvmlInit.
 */
export function adviceForNvmlCode(nvmlReturn: number, atInit: boolean, inContainer: boolean): string | null {
  switch (nvmlReturn) {
    case 9:
      return 'the NVIDIA kernel driver is not loaded: check `lsmod | grep nvidia` and `dmesg`; after a kernel update the driver module may need rebuilding (DKMS) or the host a reboot';
    case 18:
      return 'the NVML library and the loaded kernel driver are different versions: the driver was upgraded without reloading the kernel module; reboot (or stop every GPU user and reload the nvidia modules)';
    case 4:
      return 'no permission to use the GPU: check the /dev/nvidia* device permissions and this user\'s groups; in a container, check that the GPUs were passed in (device cgroup)';
    case 15:
      return 'the GPU has fallen off the bus: waiting cannot help; look for Xid 79 in `dmesg`, then reset the GPU or reboot the host';
    case 16:
      return 'the GPU needs a reset (nvidia-smi --gpu-reset) or the host a reboot: waiting cannot help';
    case 12:
      return 'NVML could not find the driver\'s own libraries: the driver installation is incomplete, or this container has only part of it mounted';
    case 999:
      if (atInit && inContainer) {
        return 'inside a container this usually means the container lost its GPU device access, often after `systemctl daemon-reload` on the host (a known NVIDIA container toolkit issue); restart the container, and configure the toolkit/cgroup driver so it does not recur';
      }
      return atInit ? 'check `dmesg` for NVIDIA driver errors (Xid) and that /dev/nvidia* exist' : null;
    default:
      return null;
  }
}
