/**
 * The Node.js the command needs: the `engines.node` of package.json (`>=22.14`), the first release
 * with `--disable-sigusr1`, which the entry point's shebang passes so that a SIGUSR1 during Node's
 * own start-up, before gpugate's listener exists, cannot open the inspector in a root process.
 * The shebang makes an older `node` refuse the flag before any JavaScript runs; this is the
 * readable refusal for a command started as `node …/main.js` on such a Node.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../package-root';

/** A `major.minor.patch` version as three numbers. */
type Version = readonly [number, number, number];

/** The lowest version `>=X.Y[.Z]` admits, or null for any other form of range. */
export function lowestAdmitted(range: string): Version | null {
  const match = /^>=\s*(\d+)(?:\.(\d+))?(?:\.(\d+))?$/.exec(range.trim());
  if (match === null) return null;
  return [Number(match[1]), Number(match[2] ?? 0), Number(match[3] ?? 0)];
}

function parseVersion(version: string): Version {
  const [major = 0, minor = 0, patch = 0] = version.replace(/^v/, '').split('.').map((part) => parseInt(part, 10) || 0);
  return [major, minor, patch];
}

function atLeast(version: Version, lowest: Version): boolean {
  for (let i = 0; i < 3; i++) {
    if (version[i]! !== lowest[i]!) return version[i]! > lowest[i]!;
  }
  return true;
}

/** package.json's `engines.node`, or null when it cannot be read. */
function enginesRange(): string | null {
  try {
    const parsed = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { engines?: { node?: unknown } };
    return typeof parsed.engines?.node === 'string' ? parsed.engines.node : null;
  } catch {
    return null;
  }
}

/**
 * Why this Node cannot run the command (`version` below the required one), or null when it can.
 * An unreadable package.json decides nothing: the shebang's flag stays the real guard.
 */
export function unsupportedNode(version: string = process.versions.node, executable: string = process.execPath): string | null {
  const range = enginesRange();
  const lowest = range === null ? null : lowestAdmitted(range);
  if (lowest === null || atLeast(parseVersion(version), lowest)) return null;
  return `Node.js ${lowest.join('.').replace(/\.0$/, '')} or newer is required (package.json engines "${range}": --disable-sigusr1); ` +
    `this is Node.js ${version} (${executable}): install a current Node.js LTS, see docs/install.md`;
}
