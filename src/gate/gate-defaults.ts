/**
 * The defaults of every gate, declared once: gate(), waitForGpusFree(), checkGpusOnce(),
 * selectGpus() and the CLI (its option table shows them in --help, its parser falls back to them)
 * all take them from here.
 */
import { DEFAULT_CALL_TIMEOUT_MS } from '../nvml/call-timeout';

/** The defaults of a gate's options, in the options' own units. */
export const gateDefaults = Object.freeze({
  /** Time between polls. */
  intervalMs: 500,
  /** How long free memory must stay within the tolerance while it can still come back (a wait; a check takes one sample). */
  stableMs: 3000,
  /** How far free memory may move and still count as stable: 256 MiB. */
  stableToleranceBytes: 256 * 1024 ** 2,
  /** How long a wait polls before giving up (`timeoutMs: Infinity` waits without end). */
  timeoutMs: 120_000,
  /** Time between SIGTERM and SIGKILL when stopping a leftover holder. */
  killGraceMs: 10_000,
  /** Deadline of each NVML call of a session opened by the gate. */
  callTimeoutMs: DEFAULT_CALL_TIMEOUT_MS,
});

/** Time between polls (gateDefaults.intervalMs). */
export const DEFAULT_INTERVAL_MS = gateDefaults.intervalMs;
/** How long free memory must stay within the tolerance (gateDefaults.stableMs). */
export const DEFAULT_STABLE_MS = gateDefaults.stableMs;
/** How long a gate waits before giving up (gateDefaults.timeoutMs). */
export const DEFAULT_TIMEOUT_MS = gateDefaults.timeoutMs;
/** Time between SIGTERM and SIGKILL (gateDefaults.killGraceMs). */
export const DEFAULT_KILL_GRACE_MS = gateDefaults.killGraceMs;
