import { defineConfig } from 'vitest/config';

// Native addons and real subprocesses: run each test file in its own forked process.
export default defineConfig({
  test: {
    pool: 'forks',
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
