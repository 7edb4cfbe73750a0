/**
 * Which exit code of the `gpugate` command (exit-code-table.ts) each outcome ends with: an
 * error, a gate's result, a signal, doctor's status. This file is the one place where a code is
 * chosen for an outcome.
 */
import type { GateResult } from '../gate/gate-outcome';
import { ErrorCode, type GpugateErrorCode } from '../gpugate-error';
import { isOsError } from '../host/os-error';
import { NvmlError } from '../nvml/nvml-error';
import { CliError } from './cli-error';
import { ExitCode, type ExitCodeValue, type InterruptSignal } from './exit-code-table';
import { InterruptedError } from './interrupted-error';

// The table itself lives apart, so the error classes can name its types without a loop back here.
export { ExitCode, type ExitCodeValue, type InterruptSignal } from './exit-code-table';

/** `gpugate doctor`'s code for the worst status it found: every check passed, warnings only, a failure. */
export function exitCodeForDoctorStatus(status: 'pass' | 'warn' | 'fail'): ExitCodeValue {
  return status === 'pass' ? ExitCode.ok : status === 'warn' ? ExitCode.tempFail : ExitCode.unavailable;
}

/** The sysexits name of a code, as systemd prints it (`TEMPFAIL`), for logs and docs. */
export function exitCodeName(code: number): string {
  switch (code) {
    case 0: return 'SUCCESS';
    case 64: return 'USAGE';
    case 69: return 'UNAVAILABLE';
    case 70: return 'SOFTWARE';
    case 71: return 'OSERR';
    case 75: return 'TEMPFAIL';
    case 77: return 'NOPERM';
    case 78: return 'CONFIG';
    case 129: return 'SIGHUP';
    case 130: return 'SIGINT';
    case 143: return 'SIGTERM';
    default: return `EXIT_${code}`;
  }
}

/** The exit code of each of gpugate's own error codes (the command layer's and aborts are decided below). */
const EXIT_CODE_OF_ERROR: Record<Exclude<GpugateErrorCode, typeof ErrorCode.command | typeof ErrorCode.aborted>, ExitCodeValue> = {
  [ErrorCode.usage]: ExitCode.usage,
  [ErrorCode.config]: ExitCode.config,
  [ErrorCode.deviceSelection]: ExitCode.config,
  [ErrorCode.waitTimeout]: ExitCode.tempFail,
  [ErrorCode.noNativeBuild]: ExitCode.unavailable,
  [ErrorCode.simLibraryNotFound]: ExitCode.unavailable,
  [ErrorCode.libraryNotFound]: ExitCode.unavailable,
  [ErrorCode.timeout]: ExitCode.unavailable,
  [ErrorCode.driverStuck]: ExitCode.unavailable,
  [ErrorCode.sessionClosed]: ExitCode.unavailable,
  [ErrorCode.queueFull]: ExitCode.unavailable,
  [ErrorCode.nativeFailure]: ExitCode.unavailable,
  [ErrorCode.nvmlHelperCrashed]: ExitCode.unavailable,
  [ErrorCode.nvmlHelperMissing]: ExitCode.unavailable,
  [ErrorCode.memoryImplausible]: ExitCode.unavailable,
  [ErrorCode.memoryUnjudgeable]: ExitCode.unavailable,
  [ErrorCode.recoveryRequired]: ExitCode.unavailable,
  [ErrorCode.systemdUnavailable]: ExitCode.unavailable,
  [ErrorCode.foreignFile]: ExitCode.noPermission,
  [ErrorCode.leaseLockTimeout]: ExitCode.tempFail,
  [ErrorCode.leaseNamespace]: ExitCode.config,
  [ErrorCode.leaseHolderGone]: ExitCode.usage,
  [ErrorCode.leaseClockUnreadable]: ExitCode.osError,
  [ErrorCode.unsafePath]: ExitCode.noPermission,
  [ErrorCode.fileAccess]: ExitCode.noPermission,
  [ErrorCode.fileSystem]: ExitCode.osError,
};

/**
 * The exit code for an error that ended a command, decided by its class or its stable `code`
 * (never by its name or message): codes also match an error raised by a second copy of the
 * package in the same process, where `instanceof` would not.
 */
export function exitCodeForError(error: unknown): ExitCodeValue {
  if (error instanceof CliError) return error.exitCode;
  // Every failure of the NVML layer, whatever its code (NVML's own, or one of gpugate's).
  if (error instanceof NvmlError) return ExitCode.unavailable;
  if (typeof error !== 'object' || error === null) return ExitCode.software;
  const e = error as { code?: unknown; cause?: unknown };
  if (typeof e.code !== 'string') return ExitCode.software;
  if (e.code === ErrorCode.aborted) {
    // An abort ends with the signal that caused it: the interruption itself, or the reason of a wait it aborted.
    const interruption = error instanceof InterruptedError ? error : e.cause instanceof InterruptedError ? e.cause : null;
    return exitCodeForSignal(interruption?.signal ?? 'SIGTERM');
  }
  if (Object.hasOwn(EXIT_CODE_OF_ERROR, e.code)) return EXIT_CODE_OF_ERROR[e.code as keyof typeof EXIT_CODE_OF_ERROR];
  // A failed NVML call: NvmlError carries NVML's name of the return value.
  if (e.code.startsWith('NVML_ERROR_')) return ExitCode.unavailable;
  // node:util parseArgs.
  if (e.code.startsWith('ERR_PARSE_ARGS_')) return ExitCode.usage;
  if (isOsError(error)) return ExitCode.osError;
  return ExitCode.software;
}

/** The exit code of a command interrupted by `signal` (128 + its number, as a shell reports it). */
export function exitCodeForSignal(signal: InterruptSignal): ExitCodeValue {
  if (signal === 'SIGINT') return ExitCode.sigint;
  if (signal === 'SIGHUP') return ExitCode.sighup;
  return ExitCode.sigterm;
}

/** The exit code of a gate's result; an interrupted gate exits by the signal that interrupted it (SIGTERM when unknown). */
export function exitCodeForResult(result: GateResult, interruptedBy: InterruptSignal | null): ExitCodeValue {
  switch (result) {
    case 'ready': return ExitCode.ok;
    case 'busy':
    case 'timeout':
    case 'stale': return ExitCode.tempFail;
    case 'interrupted': return exitCodeForSignal(interruptedBy ?? 'SIGTERM');
    case 'no-permission': return ExitCode.noPermission;
    case 'unavailable': return ExitCode.unavailable;
    case 'config-error': return ExitCode.config;
    case 'os-error': return ExitCode.osError;
    case 'internal-error': return ExitCode.software;
  }
}
