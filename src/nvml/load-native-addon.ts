/**
 * Loads gpugate's native addon from the package root with node-gyp-build's search order (a local
 * build in build/Release or build/Debug first, then the prebuilds/<platform>-<arch>/ shipped in the
 * package; GPUGATE_PREBUILD=<dir> searches <dir> instead, PREBUILDS_ONLY=1 skips local builds),
 * turning "nothing matches" into a NativeLoadError that lists every place searched.
 */
import * as path from 'node:path';
import { explainNativeLoadFailure } from './native-load-error';

type NodeGypBuild = (dir: string) => unknown;

/** The binary `npx node-gyp rebuild` writes: node-gyp-build's first candidate. */
const LOCAL_BUILD = path.join('build', 'Release', 'gpugate.node');

/**
 * Requires the addon binary for this runtime and returns its exports (untyped: src/nvml/binding.ts
 * checks them against its NativeBinding interface).
 * @param packageRoot the directory holding gpugate's package.json
 * @throws NativeLoadError when no binary matches; any other load error unchanged
 */
export function loadNativeAddon(packageRoot: string): unknown {
  // Every command start pays for loading and running the search: where the search would stop at
  // the local build anyway, require that file directly.
  // (node-gyp-build reads both variables as set when non-empty.)
  if (!process.env['GPUGATE_PREBUILD'] && !process.env['PREBUILDS_ONLY']) {
    try {
      return require(path.join(path.resolve(packageRoot), LOCAL_BUILD)) as unknown;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'MODULE_NOT_FOUND') throw error;
    }
  }
  const nodeGypBuild = require('node-gyp-build') as NodeGypBuild;
  try {
    return nodeGypBuild(packageRoot);
  } catch (err) {
    throw explainNativeLoadFailure(err, packageRoot);
  }
}
