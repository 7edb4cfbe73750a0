import { defineConfig } from 'vitest/config';

// The end-to-end suite under a real systemd (test/e2e-systemd/): root, a few minutes, one file.
export default defineConfig({
  test: {
    pool: 'forks',
    include: ['test/e2e-systemd/**/*.e2e.ts'],
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 120_000,
    hookTimeout: 60_000,
    fileParallelism: false,
  },
});
