/**
 * Where the benchmark finds things: the repository root (found by walking up from this file, so
 * the harness works both from bench/ and from its transpiled copy in .tmp/bench/), the built
 * simulator, the compiled package (dist/) and the scratch directory for compiled C programs.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

/** The repository root: the nearest ancestor holding both binding.gyp and package.json. */
export function repoRoot(): string {
  let dir = __dirname;
  for (;;) {
    if (fs.existsSync(path.join(dir, 'binding.gyp')) && fs.existsSync(path.join(dir, 'package.json'))) return dir;
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`gpugate bench: no repository root (binding.gyp + package.json) above ${__dirname}`);
    dir = parent;
  }
}

/** The simulator library built by `npx node-gyp rebuild`. */
export function simulatorLibrary(root = repoRoot()): string {
  return path.join(root, 'build', 'Release', 'gpugate_sim.so');
}

/** The compiled CLI entry. */
export function cliEntry(root = repoRoot()): string {
  return path.join(root, 'dist', 'cli', 'main.js');
}

/** The compiled package entry. */
export function packageEntry(root = repoRoot()): string {
  return path.join(root, 'dist', 'index.js');
}

/** Scratch directory for compiled C programs, scenarios and stats files (gitignored). */
export function scratchDir(root = repoRoot()): string {
  const dir = path.join(root, '.tmp', 'bench-work');
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

/** Where the machine-readable results go (gitignored). */
export function resultsDir(root = repoRoot()): string {
  const dir = path.join(root, 'bench', 'results');
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}
