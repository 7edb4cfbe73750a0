import { defineConfig } from 'vitest/config';

// Native addons and real subprocesses: run each test file in its own forked process.
export default defineConfig({
  test: {
    pool: 'forks',
    include: ['test/**/*.test.ts'],
    // Compiles dist/ once when src/ is newer: the CLI tests run the built command as a subprocess.
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
