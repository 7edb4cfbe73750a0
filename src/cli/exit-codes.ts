/**
 * The exit codes of the `gpugate` command: BSD sysexits, so systemd shows e.g.
 * `status=75/TEMPFAIL`. This file is the one place where a code is chosen for an outcome.
 */
import type { GateResult } from '../gate/gate-outcome';
import { ErrorCode, type GpugateErrorCode } from '../gpugate-error';
import { isOsError } from '../host/os-error';
import { NvmlError } from '../nvml/nvml-error';
import { CliError } from './cli-error';
import { InterruptedError } from './interrupted-error';

/** Every exit code the command can end with. */
export const ExitCode = {
  /** All selected GPUs meet the criteria and are stable. */
  ok: 0,
  /** Usage error: unknown flag, bad size or duration. */
  usage: 64,
  /** NVML missing or failing to initialise, version mismatch, GPU lost (also as the GPU a UUID may name), NVML call hung, memory figures that do not add up or cannot be judged here, a GPU whose driver names a recovery action (reset, reboot, drain); systemctl unreachable. */
  unavailable: 69,
  /** Internal error: a bug in gpugate. */
  software: 70,
  /** /proc or cgroupfs unreadable where required; a file gpugate writes failed in the OS (ENOSPC, EROFS, EIO…). */
  osError: 71,
  /** Timed out: still busy or not yet stable. */
  tempFail: 75,
  /** No permission for a requested action (`--kill-stale`, `--clean-shm`; `systemd --write` over a file gpugate did not write); a path gpugate refuses to write through. */
  noPermission: 77,
  /** Impossible configuration: `--gpus` matches nothing, no GPU selected (without --allow-empty), threshold above total, fraction outside 0–1; the command started on a Node.js older than package.json's engines. */
  config: 78,
  /** Interrupted by SIGHUP (the terminal or session went away), after printing the last state. */
  sighup: 129,
  /** Interrupted by SIGINT, after printing the last state. */
  sigint: 130,
  /** Interrupted by SIGTERM, after printing the last state. */
  sigterm: 143,
} as const;

/** One of the codes of {@link ExitCode}. */
export type ExitCodeValue = (typeof ExitCode)[keyof typeof ExitCode];

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
  [ErrorCode.sessionClosed]: ExitCode.unavailable,
  [ErrorCode.queueFull]: ExitCode.unavailable,
  [ErrorCode.nativeFailure]: ExitCode.unavailable,
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

/** The signals that interrupt a command. */
export type InterruptSignal = 'SIGINT' | 'SIGTERM' | 'SIGHUP';

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
