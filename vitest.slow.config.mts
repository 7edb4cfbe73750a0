import { defineConfig } from 'vitest/config';
import suites from './test/suites.cjs';
const { SLOW_SUITES } = suites;

// The slow suites of test/suites.cjs, one vitest project each: `npm run test:slow` runs them all,
// `npm run test:<name>` one (`vitest run -c vitest.slow.config.mts --project <name>`).
export default defineConfig({
  test: {
    pool: 'forks',
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    projects: SLOW_SUITES.map((suite) => ({
      extends: true,
      // A suite whose files share one preparation runs them one at a time.
      test: { name: suite.name, include: [...suite.files], ...(suite.sequential === true ? { fileParallelism: false } : {}) },
    })),
  },
});
