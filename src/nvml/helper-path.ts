/**
 * Where the NVML helper executable is: beside the addon file that loads (or would load), as the
 * addon itself finds it. Never found through PATH or an environment variable of its own.
 */
import * as path from 'node:path';
import { existsSync } from 'node:fs';
import { PACKAGE_ROOT } from '../package-root';

/** The helper's file name, in build/Release/ and in prebuilds/<platform>-<arch>/. */
export const NVML_HELPER_NAME = 'gpugate-nvml-helper';

/**
 * The absolute path of `gpugate-nvml-helper` beside the addon: the local build's when the loader
 * takes the local build (src/nvml/load-native-addon.ts), else beside the binary node-gyp-build
 * picks. Null when no addon binary is found (the session's own load error says why).
 */
export function nvmlHelperPath(packageRoot: string = PACKAGE_ROOT): string | null {
  const root = path.resolve(packageRoot);
  const localBuild = path.join(root, 'build', 'Release', 'gpugate.node');
  if (!process.env['GPUGATE_PREBUILD'] && !process.env['PREBUILDS_ONLY'] && existsSync(localBuild)) {
    return path.join(path.dirname(localBuild), NVML_HELPER_NAME);
  }
  const nodeGypBuild = require('node-gyp-build') as { path: (dir: string) => string };
  try {
    return path.join(path.dirname(nodeGypBuild.path(root)), NVML_HELPER_NAME);
  } catch {
    return null;
  }
}
