/**
 * Where the installed package lives and what version it is. The compiled command runs from
 * dist/cli/ and the sources (under vitest) from src/cli/: both are two levels below the root.
 */

import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The package root (the folder holding package.json). */
export const PACKAGE_ROOT = join(__dirname, '..', '..');

/** The version in package.json, or 'unknown' when it cannot be read. */
export function packageVersion(): string {
  try {
    const parsed = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version?: unknown };
    return typeof parsed.version === 'string' ? parsed.version : 'unknown';
  } catch {
    return 'unknown';
  }
}
