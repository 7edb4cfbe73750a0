/**
 * Setup file of the sanitizer test run (vitest.asan.config.mjs): after the last test of each test
 * file, still inside the worker, runs LeakSanitizer's recoverable check through the hook addon that
 * run-asan-tests.mjs built (GPUGATE_LSAN_HOOK). Checking here rather than at exit matters: vitest
 * stops a worker with SIGTERM and SIGKILLs it 500 ms later, which a check at exit could miss.
 * Reports go to the ASan log files; the runner reads them.
 */
import { createRequire } from 'node:module';
import { afterAll } from 'vitest';

const hookPath = process.env['GPUGATE_LSAN_HOOK'];
if (hookPath) {
  const hook = createRequire(__filename)(hookPath) as { check(): number };
  afterAll(() => {
    hook.check();
  });
}
