/**
 * vitest global setup: makes sure dist/ (the compiled TypeScript that the CLI tests and other
 * subprocess tests run) is current, by running `scripts/build-ts.mjs --if-changed` (it rebuilds
 * when src/, the tsconfig files, package.json or the bundler changed since dist/ was built); builds the simulator's driver profiles
 * when the build lacks one (a fresh clone's `npm install` builds only the addon and the current
 * driver's simulator; this never rebuilds the addon); and creates the run's temp folder
 * (helpers/temp-root.ts), removed at teardown with everything the test processes left in it.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildSimProfiles } from '../scripts/native-build.cjs';
import { TEST_RUN_PREFIX, TEST_TMPDIR_ENV } from './helpers/temp-root';

const root = join(__dirname, '..');

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Removes the folders of earlier runs whose vitest process is gone (a run killed before its teardown). */
function removeAbandonedRuns(): void {
  for (const name of readdirSync(tmpdir())) {
    const match = new RegExp(`^${TEST_RUN_PREFIX}(\\d+)-`).exec(name);
    if (match && !alive(Number(match[1]))) rmSync(join(tmpdir(), name), { recursive: true, force: true });
  }
}

export default function setup(): () => void {
  execFileSync(process.execPath, [join(root, 'scripts', 'build-ts.mjs'), '--if-changed'], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
  buildSimProfiles(root);
  removeAbandonedRuns();
  const runDir = mkdtempSync(join(tmpdir(), `${TEST_RUN_PREFIX}${process.pid}-`));
  // Test processes are forked after the global setup and inherit this environment.
  process.env[TEST_TMPDIR_ENV] = runDir;
  const remove = (): void => rmSync(runDir, { recursive: true, force: true });
  process.once('exit', remove);
  return remove;
}
