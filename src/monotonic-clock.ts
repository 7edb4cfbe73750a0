/**
 * Milliseconds on the monotonic clock, for durations and deadlines only (its origin means
 * nothing). `performance.now()` reads the same clock, but its module (node:perf_hooks) loads a
 * dozen of Node's internal modules: a few percent of a short command's whole start.
 */

/** Now, in milliseconds, on the monotonic clock. */
export function monotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}
