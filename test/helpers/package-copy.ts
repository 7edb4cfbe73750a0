/**
 * A copy of the built package in a temporary folder, with its own NVML helper: tests that leave a
 * helper stuck in the kernel on purpose run the command and the library from it, so that the
 * stuck helper is this copy's, and the gates other test files run at the same time from the
 * checkout (which refuse while a helper of their own package is stuck: GPUGATE_DRIVER_STUCK) are
 * not affected.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { repoRoot, testTempDir } from './sim';

export interface PackageCopy {
  root: string;
  /** The command's entry, dist/cli/main.js. */
  cli: string;
  /** `require(...)`'s argument for the library, as a JavaScript string literal. */
  entryLiteral: string;
  /** The copy's NVML helper, beside its addon. */
  helperPath: string;
}

/** Copies dist/, package.json and the built addon and helper (real copies: a helper's /proc/PID/exe names the copy). */
export function makePackageCopy(): PackageCopy {
  const root = fs.mkdtempSync(path.join(testTempDir(), 'package-copy-'));
  fs.chmodSync(root, 0o755);
  fs.copyFileSync(path.join(repoRoot(), 'package.json'), path.join(root, 'package.json'));
  fs.cpSync(path.join(repoRoot(), 'dist'), path.join(root, 'dist'), { recursive: true });
  fs.symlinkSync(path.join(repoRoot(), 'node_modules'), path.join(root, 'node_modules'));
  const release = path.join(root, 'build', 'Release');
  fs.mkdirSync(release, { recursive: true, mode: 0o755 });
  for (const file of ['gpugate.node', 'gpugate-nvml-helper']) {
    const from = path.join(repoRoot(), 'build', 'Release', file);
    if (fs.existsSync(from)) fs.copyFileSync(from, path.join(release, file));
  }
  if (fs.existsSync(path.join(release, 'gpugate-nvml-helper'))) fs.chmodSync(path.join(release, 'gpugate-nvml-helper'), 0o755);
  return {
    root,
    cli: path.join(root, 'dist', 'cli', 'main.js'),
    entryLiteral: JSON.stringify(path.join(root, 'dist', 'index.js')),
    helperPath: path.join(release, 'gpugate-nvml-helper'),
  };
}
