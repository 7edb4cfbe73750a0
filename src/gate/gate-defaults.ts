/**
 * The timing defaults of a gate (`gate()`, `gpugate wait` / `check`), declared once: the CLI's
 * option table shows them in --help and its parser falls back to them.
 */

/** Time between polls. */
export const DEFAULT_INTERVAL_MS = 500;
/** How long free memory must stay within the tolerance while it can still come back. */
export const DEFAULT_STABLE_MS = 3000;
/** How long a gate waits before giving up. */
export const DEFAULT_TIMEOUT_MS = 120_000;
/** Time between SIGTERM and SIGKILL when stopping a leftover holder. */
export const DEFAULT_KILL_GRACE_MS = 10_000;
