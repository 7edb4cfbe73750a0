/**
 * Loads gpugate's native addon from the package root with node-gyp-build (a local build in
 * build/Release or build/Debug first, then the prebuilds/<platform>-<arch>/ shipped in the package;
 * GPUGATE_PREBUILD=<dir> searches <dir> instead, PREBUILDS_ONLY=1 skips local builds), turning
 * "nothing matches" into a NativeLoadError that lists every place searched.
 */

import { explainNativeLoadFailure } from './native-load-error';

type NodeGypBuild = (dir: string) => unknown;

/**
 * Requires the addon binary for this runtime and returns its exports (untyped: src/nvml/binding.ts
 * checks them against its NativeBinding interface).
 * @param packageRoot the directory holding gpugate's package.json
 * @throws NativeLoadError when no binary matches; any other load error unchanged
 */
export function loadNativeAddon(packageRoot: string): unknown {
  const nodeGypBuild = require('node-gyp-build') as NodeGypBuild;
  try {
    return nodeGypBuild(packageRoot);
  } catch (err) {
    throw explainNativeLoadFailure(err, packageRoot);
  }
}
