/**
 * Finds gpugate's NVML simulator library (the file that `gpugate demo`, the tests and users' own
 * tooling pass as GPUGATE_NVML_LIBRARY). It is searched where the addon is: GPUGATE_PREBUILD's
 * build/Release when that is set, else a local build (build/Release, build/Debug) unless
 * PREBUILDS_ONLY is set, then the prebuilds/<platform>-<arch>/ directory shipped in the package.
 */

import * as fs from 'node:fs';
import * as path from 'node:path';

/** The simulator libraries gpugate builds. */
export type SimLibraryName = 'gpugate_sim' | 'gpugate_sim_legacy';

/** Options for `findSimLibrary`. */
export interface FindSimLibraryOptions {
  /** Which simulator: the full one (default) or the legacy-ABI one. */
  name?: SimLibraryName;
  /** gpugate's package root (default: the directory above this module's). */
  packageRoot?: string;
}

/** Thrown when the simulator library is in none of the places searched. */
export class SimLibraryNotFoundError extends Error {
  readonly code = 'GPUGATE_SIM_LIBRARY_NOT_FOUND';
  /** Every path that was tried, in order. */
  readonly tried: string[];

  constructor(name: string, tried: string[]) {
    super(
      `gpugate: the simulator library ${name}.so was not found; tried:\n` +
        tried.map((p) => `  ${p}`).join('\n') +
        '\nBuild it with `npx node-gyp rebuild` (or `npm run build:cmake`), or install a package with prebuilds.',
    );
    this.name = 'SimLibraryNotFoundError';
    this.tried = tried;
  }
}

/** Every path the simulator library is looked for at, in search order. */
export function simLibraryCandidates(options: FindSimLibraryOptions = {}): string[] {
  const file = `${options.name ?? 'gpugate_sim'}.so`;
  const root = path.resolve(options.packageRoot ?? path.join(__dirname, '..'));
  const candidates: string[] = [];
  const override = process.env['GPUGATE_PREBUILD'];
  const base = override ? path.resolve(override) : root;
  if (!process.env['PREBUILDS_ONLY']) {
    candidates.push(path.join(base, 'build', 'Release', file), path.join(base, 'build', 'Debug', file));
  }
  const platform = process.env['npm_config_platform'] ?? process.platform;
  const arch = process.env['npm_config_arch'] ?? process.arch;
  candidates.push(path.join(base, 'prebuilds', `${platform}-${arch}`, file));
  return candidates;
}

/**
 * The absolute path of the simulator library.
 * @throws SimLibraryNotFoundError listing every path tried
 */
export function findSimLibrary(options: FindSimLibraryOptions = {}): string {
  const candidates = simLibraryCandidates(options);
  const found = candidates.find((p) => fs.existsSync(p));
  if (found === undefined) throw new SimLibraryNotFoundError(options.name ?? 'gpugate_sim', candidates);
  return found;
}
