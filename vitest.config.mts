import { configDefaults, defineConfig } from 'vitest/config';
import suites from './test/suites.cjs';
const { DEFAULT_SUITE, DEFAULT_SUITE_EXCLUDES } = suites;

// `npm test`: the default suite of test/suites.cjs (the slow suites have vitest.slow.config.mts).
// Native addons and real subprocesses: run each test file in its own forked process.
export default defineConfig({
  test: {
    pool: 'forks',
    include: [...DEFAULT_SUITE.files],
    exclude: [...configDefaults.exclude, ...DEFAULT_SUITE_EXCLUDES],
    // Compiles dist/ once when src/ is newer (the CLI tests run the built command as a subprocess)
    // and builds the simulator's other driver profiles when a fresh clone lacks them.
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
