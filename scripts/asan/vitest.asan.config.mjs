// vitest.asan.config.mjs: the repository's vitest configuration plus one setup file that runs
// LeakSanitizer's check after the last test of each test file, inside the worker (see
// lsan-check-after-file.ts). Used by run-asan-tests.mjs only.
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig, mergeConfig } from 'vitest/config';
import base from '../../vitest.config.mts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

export default mergeConfig(base, defineConfig({
  root,
  test: {
    setupFiles: [resolve(root, 'scripts', 'asan', 'lsan-check-after-file.ts')],
  },
}));
