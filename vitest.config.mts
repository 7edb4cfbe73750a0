import { availableParallelism } from 'node:os';
import { matchesGlob, normalize } from 'node:path';
import { configDefaults, defineConfig } from 'vitest/config';
import suites from './test/suites.cjs';
const { DEFAULT_SUITE, DEFAULT_SUITE_EXCLUDES, SLOW_SUITES } = suites;

// A file of a slow suite named on the command line matches nothing here, and vitest only says
// "No test files found": name the script that runs it.
for (const arg of process.argv.slice(2).map((a) => normalize(a))) {
  const suite = SLOW_SUITES.find((s) => s.files.some((glob) => matchesGlob(arg, glob)));
  if (suite !== undefined) console.warn(`${arg} is in the ${suite.name} suite (test/suites.cjs): npm run test:${suite.name} -- ${arg}`);
}

// `npm test`: the default suite of test/suites.cjs (the slow suites have vitest.slow.config.mts).
// Native addons and real subprocesses: run each test file in its own forked process.
export default defineConfig({
  test: {
    pool: 'forks',
    // Most of a test file's time is spent waiting (subprocesses, the simulated timeline, real
    // signals), not on a CPU: vitest's default (one worker fewer than the CPUs) would run the
    // files one at a time on two cores. Three workers per two CPUs keep both busy (a percentage
    // would be capped at the CPU count).
    maxWorkers: Math.ceil(availableParallelism() * 1.5),
    include: [...DEFAULT_SUITE.files],
    exclude: [...configDefaults.exclude, ...DEFAULT_SUITE_EXCLUDES],
    // Compiles dist/ once when src/ is newer (the CLI tests run the built command as a subprocess)
    // and builds the simulator's other driver profiles when a fresh clone lacks them.
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
