/** The version of the installed package. */

import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { PACKAGE_ROOT } from '../package-root';

/** The version in package.json, or 'unknown' when it cannot be read. */
export function packageVersion(): string {
  try {
    const parsed = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version?: unknown };
    return typeof parsed.version === 'string' ? parsed.version : 'unknown';
  } catch {
    return 'unknown';
  }
}
