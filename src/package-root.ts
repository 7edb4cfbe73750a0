/**
 * Where the installed package lives: the folder holding package.json, binding.gyp, build/ and
 * scenarios/. Every layer folder (src/nvml/, src/cli/, dist/gate/ …) sits one level below the
 * source or build root, which itself sits one level below the package root; this file sits
 * directly in the source or build root. The bundled CLI (dist/cli/main.js, one file holding this
 * code too) runs from dist/cli/, a level deeper: its build defines GPUGATE_BUNDLED_CLI.
 */
import { join } from 'node:path';

declare const GPUGATE_BUNDLED_CLI: boolean | undefined;

/** The package root. */
export const PACKAGE_ROOT = join(__dirname, typeof GPUGATE_BUNDLED_CLI === 'boolean' && GPUGATE_BUNDLED_CLI ? '../..' : '..');
