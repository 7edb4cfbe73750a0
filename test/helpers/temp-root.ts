/**
 * Where tests put temporary files: under one folder per vitest run (created by the global setup,
 * named by GPUGATE_TEST_TMPDIR, removed by its teardown), so a test process that is killed or
 * fails still leaves nothing behind once the run ends. Outside vitest (a test helper imported by
 * a script) the OS temp dir is used.
 */
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';

/** The environment variable naming the per-run folder. */
export const TEST_TMPDIR_ENV = 'GPUGATE_TEST_TMPDIR';

/** The prefix of a per-run folder in the OS temp dir; the pid of the vitest process follows it. */
export const TEST_RUN_PREFIX = 'gpugate-test-run-';

/** The folder tests create their temporary files in. */
export function testTmpRoot(): string {
  const dir = process.env[TEST_TMPDIR_ENV];
  return dir !== undefined && dir !== '' && existsSync(dir) ? dir : tmpdir();
}

/** A fresh directory `prefix` + random suffix under testTmpRoot(). */
export function makeTestTempDir(prefix: string): string {
  return mkdtempSync(path.join(testTmpRoot(), prefix));
}
