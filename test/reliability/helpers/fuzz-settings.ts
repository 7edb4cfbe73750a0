/**
 * Fuzzing parameters shared by test/reliability/fuzz-*.test.ts: fixed seeds and modest run
 * counts in CI, overridable for longer local runs with FUZZ_RUNS (a multiplier of every
 * property's default run count when it ends in "x", e.g. FUZZ_RUNS=20x, else an absolute count)
 * and FUZZ_SEED (an integer).
 */

/** The seed every property uses (FUZZ_SEED, default a fixed value so CI runs are reproducible). */
export function fuzzSeed(): number {
  const text = process.env['FUZZ_SEED'];
  if (text === undefined || text === '') return 0x6a7e_2026;
  const seed = Number(text);
  if (!Number.isSafeInteger(seed)) throw new Error(`FUZZ_SEED must be an integer, got ${JSON.stringify(text)}`);
  return seed;
}

/** The number of runs for a property whose CI default is `defaultRuns`. */
export function fuzzRuns(defaultRuns: number): number {
  const text = process.env['FUZZ_RUNS'];
  if (text === undefined || text === '') return defaultRuns;
  const multiplier = /^(\d+(?:\.\d+)?)x$/.exec(text);
  const runs = multiplier ? Math.round(defaultRuns * Number(multiplier[1])) : Number(text);
  if (!Number.isSafeInteger(runs) || runs < 1) throw new Error(`FUZZ_RUNS must be a positive count or a multiplier like 10x, got ${JSON.stringify(text)}`);
  return runs;
}

/** fast-check parameters for a property (seed, runs, and the counterexample path in failures). */
export function fuzzParameters(defaultRuns: number): { seed: number; numRuns: number; verbose: number } {
  return { seed: fuzzSeed(), numRuns: fuzzRuns(defaultRuns), verbose: 1 };
}

/** Totals of runs per property, printed by each fuzz file so docs/reliability.md can quote them. */
export function describeRuns(name: string, defaultRuns: number): string {
  return `${name}: ${fuzzRuns(defaultRuns)} runs (seed ${fuzzSeed()})`;
}
