/**
 * Latency figures as `gpugate bench` and the benchmark harness (bench/) both report them: the
 * nearest-rank percentile of a sample, and a time in nanoseconds as a short human string.
 * Imports nothing, so the harness's transpiled copy can load it as it is.
 */

/** Nearest-rank percentile (0 < p <= 1) of an ascending, non-empty array. */
export function nearestRankPercentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) throw new RangeError('percentile of an empty sample');
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil(p * sorted.length)));
  return sorted[rank - 1] as number;
}

/** `850 ns`, `4.20 µs`, `31.5 ms`, `1.50 s`: two decimals below 10 of a unit, one above. */
export function formatNanoseconds(ns: number): string {
  if (!Number.isFinite(ns)) return 'n/a';
  if (ns < 1_000) return `${ns.toFixed(0)} ns`;
  if (ns < 1_000_000) return `${(ns / 1_000).toFixed(ns < 10_000 ? 2 : 1)} µs`;
  if (ns < 1_000_000_000) return `${(ns / 1_000_000).toFixed(ns < 10_000_000 ? 2 : 1)} ms`;
  return `${(ns / 1e9).toFixed(2)} s`;
}
