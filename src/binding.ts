/**
 * Loads the native addon once per JavaScript environment. node-gyp-build looks under the
 * package root (prebuilds/ first, then build/Release), so this works from src/ under vitest and
 * from dist/ once compiled.
 */
import * as path from 'node:path';
import type { NativeBinding } from './native-binding';

let cached: NativeBinding | undefined;

/** The loaded addon (loaded on first use; throws a clear Error if it was never built). */
export function loadBinding(): NativeBinding {
  if (cached !== undefined) return cached;
  const packageRoot = path.join(__dirname, '..');
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const nodeGypBuild = require('node-gyp-build') as (dir: string) => unknown;
  try {
    cached = nodeGypBuild(packageRoot) as NativeBinding;
  } catch (error) {
    const detail = error instanceof Error ? error.message : String(error);
    throw new Error(
      `gpugate: the native addon could not be loaded from ${packageRoot} (prebuilds/ or build/Release/gpugate.node): ${detail}. ` +
        'Run `npm run build:native` (needs a C++17 compiler and python3) or reinstall the package.',
    );
  }
  return cached;
}
