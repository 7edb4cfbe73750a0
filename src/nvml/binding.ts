/**
 * Loads the native addon once per JavaScript environment. node-gyp-build looks under the
 * package root (build/Release, build/Debug, then prebuilds/<platform>-<arch>/), so this works from
 * src/ under vitest and from dist/ once compiled. A missing binary becomes a NativeLoadError that
 * lists every place searched; any other load error passes through unchanged.
 */
import { PACKAGE_ROOT } from '../package-root';
import { loadNativeAddon } from './load-native-addon';
import type { NativeBinding } from './native-binding';

let cached: NativeBinding | undefined;

/** The loaded addon (loaded on first use). */
export function loadBinding(): NativeBinding {
  if (cached === undefined) cached = loadNativeAddon(PACKAGE_ROOT) as NativeBinding;
  return cached;
}
