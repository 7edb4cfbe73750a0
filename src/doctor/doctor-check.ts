/**
 * One finding of `gpugate doctor`: what was checked, how it came out, the evidence it rests on
 * and what to do about it. Every group of checks (driver, GPUs, kernel log, host, unit) returns a
 * list of these; the command renders them and picks the exit code from the worst status.
 */

/** pass: nothing to do; warn: works, but costs time or hides a risk; fail: the gate or the service cannot work as intended. */
export type DoctorStatus = 'pass' | 'warn' | 'fail';

/** One check's result. */
export interface DoctorCheck {
  /** Stable identifier of the check, e.g. 'driver.version-match', 'gpu.persistence-mode', 'unit.restart-limits'. */
  id: string;
  /** What was checked: 'driver', 'GPU 3 (GPU-…)', 'host', 'unit vllm.service'. */
  subject: string;
  status: DoctorStatus;
  /** One line saying what was found. */
  summary: string;
  /** The readings the status rests on (values as read; JSON-serialisable). */
  evidence: Record<string, unknown>;
  /** What to do, when the status is not pass. */
  advice?: string;
}

/** The worst status of a list (pass for an empty one). */
export function worstStatus(checks: readonly DoctorCheck[]): DoctorStatus {
  if (checks.some((check) => check.status === 'fail')) return 'fail';
  if (checks.some((check) => check.status === 'warn')) return 'warn';
  return 'pass';
}
