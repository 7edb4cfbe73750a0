/**
 * Whether a service may depend on a file staying where it is. A unit that names a program inside
 * a project's node_modules (gone at the next `npm ci`), an npx cache, a home directory or a
 * temporary directory breaks when that place is cleaned; a command installed on the system path
 * does not. Also: the search path systemd gives a service, where its `env -S node` shebang finds node.
 */
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, sep } from 'node:path';

/** The PATH systemd gives a service that sets none (systemd.exec(5), "Environment variables in spawned processes"). */
export const SYSTEMD_SERVICE_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin';

/** Overrides SYSTEMD_SERVICE_PATH: a manager whose DefaultEnvironment= sets another PATH, or a test. */
export const SERVICE_PATH_ENV = 'GPUGATE_SERVICE_PATH';

/** Temporary directories whatever TMPDIR says. */
const TEMPORARY_DIRS = ['/tmp', '/var/tmp', '/dev/shm'];

/** Home directories whatever HOME says. */
const HOME_DIRS = ['/home', '/root'];

function isInside(path: string, dir: string): boolean {
  const trimmed = dir.length > 1 && dir.endsWith(sep) ? dir.slice(0, -1) : dir;
  return trimmed !== '' && trimmed !== sep && (path === trimmed || path.startsWith(`${trimmed}${sep}`));
}

/** The project folder whose node_modules holds `path` (a node_modules beside a package.json), or null. */
function projectOf(path: string): string | null {
  for (let dir = dirname(path); dir !== dirname(dir); dir = dirname(dir)) {
    if (basename(dir) === 'node_modules' && existsSync(join(dirname(dir), 'package.json'))) return dirname(dir);
  }
  return null;
}

/**
 * Why a service should not depend on the file at `path` (an absolute, resolved path), or null when
 * nothing says it will go away: an npx cache, a project's node_modules, a home directory, a
 * temporary directory, checked in that order.
 */
export function unstableLocation(path: string, env: NodeJS.ProcessEnv = process.env): string | null {
  if (path.split(sep).includes('_npx')) return 'an npx cache, removed whenever npm cleans its cache';
  const project = projectOf(path);
  if (project !== null) return `the node_modules of the project ${project}, replaced or removed by its next npm install or npm ci`;
  const homes = [...HOME_DIRS, ...(env['HOME'] === undefined ? [] : [env['HOME']])];
  if (homes.some((home) => isInside(path, home))) return 'a home directory, which a service should not depend on';
  if ([...TEMPORARY_DIRS, tmpdir()].some((dir) => isInside(path, dir))) return 'a temporary directory, cleaned at boot or by age';
  return null;
}

/** The directories a service searches for a program named without a path, in order. */
export function servicePathDirs(env: NodeJS.ProcessEnv = process.env): string[] {
  const path = env[SERVICE_PATH_ENV] ?? SYSTEMD_SERVICE_PATH;
  return path.split(':').filter((dir) => dir.startsWith(sep));
}
