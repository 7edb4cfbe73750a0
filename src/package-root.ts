/**
 * Where the installed package lives: the folder holding package.json, binding.gyp, build/ and
 * scenarios/. Every layer folder (src/nvml/, src/cli/, dist/gate/ …) sits one level below the
 * source or build root, which itself sits one level below the package root; this file sits
 * directly in the source or build root.
 */
import { join } from 'node:path';

/** The package root. */
export const PACKAGE_ROOT = join(__dirname, '..');
