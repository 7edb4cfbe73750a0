// vitest.asan.config.mjs: the repository's vitest configuration plus one setup file that runs
// LeakSanitizer's check after the last test of each test file, inside the worker (see
// lsan-check-after-file.ts). Used by run-asan-tests.mjs only.
import { availableParallelism } from 'node:os';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig, mergeConfig } from 'vitest/config';
import base from '../../vitest.config.mts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

export default mergeConfig(base, defineConfig({
  root,
  test: {
    // Sanitized code runs several times slower: keep vitest's own default here (one worker fewer
    // than the CPUs) rather than npm test's extra workers for waiting tests.
    maxWorkers: Math.max(availableParallelism() - 1, 1),
    setupFiles: [resolve(root, 'scripts', 'asan', 'lsan-check-after-file.ts')],
  },
}));
