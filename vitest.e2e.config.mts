import { defineConfig } from 'vitest/config';
import suites from './test/suites.cjs';
const { E2E_SUITE } = suites;

// The end-to-end suite under a real systemd (test/e2e-systemd/): root, a few minutes, one file at a time.
export default defineConfig({
  test: {
    pool: 'forks',
    include: [...E2E_SUITE.files],
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 120_000,
    hookTimeout: 60_000,
    fileParallelism: false,
  },
});
