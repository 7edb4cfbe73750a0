/**
 * The exit codes of the `gpugate` command, as data: BSD sysexits, so systemd shows e.g.
 * `status=75/TEMPFAIL`. Which outcome ends with which code is decided in exit-codes.ts.
 */

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

/** The signals that interrupt a command. */
export type InterruptSignal = 'SIGINT' | 'SIGTERM' | 'SIGHUP';
