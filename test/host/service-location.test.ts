/**
 * Which places a service should not depend on (src/host/service-location.ts), on real folders: a
 * project's node_modules (a node_modules beside a package.json), an npx cache, a home directory
 * and a temporary directory are named with why; a global install's lib/node_modules and /usr are not.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { servicePathDirs, SYSTEMD_SERVICE_PATH, unstableLocation } from '../../src/host/service-location';
import { makeTestTempDir } from '../helpers/temp-root';

describe('unstableLocation', () => {
  const made: string[] = [];
  afterEach(() => {
    for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  it('names a project\'s node_modules, before the temporary directory it lies in', () => {
    const project = makeTestTempDir('gpugate-location-');
    made.push(project);
    writeFileSync(join(project, 'package.json'), '{}');
    const main = join(project, 'node_modules', 'gpugate', 'dist', 'cli', 'main.js');
    mkdirSync(join(main, '..'), { recursive: true });
    writeFileSync(main, '');
    expect(unstableLocation(main, {})).toBe(`the node_modules of the project ${project}, replaced or removed by its next npm install or npm ci`);
  });

  it('names a global install under a temporary prefix as temporary (no package.json beside its node_modules)', () => {
    const prefix = makeTestTempDir('gpugate-location-');
    made.push(prefix);
    const main = join(prefix, 'lib', 'node_modules', 'gpugate', 'dist', 'cli', 'main.js');
    mkdirSync(join(main, '..'), { recursive: true });
    writeFileSync(main, '');
    expect(unstableLocation(main, {})).toBe('a temporary directory, cleaned at boot or by age');
  });

  it('names an npx cache and a home directory, and leaves the system\'s places alone', () => {
    expect(unstableLocation('/root/.npm/_npx/1a2b/node_modules/gpugate/dist/cli/main.js', {})).toBe('an npx cache, removed whenever npm cleans its cache');
    expect(unstableLocation('/srv/me/.nvm/versions/node/v24/bin/node', { HOME: '/srv/me' })).toBe('a home directory, which a service should not depend on');
    expect(unstableLocation('/home/ann/gpugate/dist/cli/main.js', {})).toBe('a home directory, which a service should not depend on');
    expect(unstableLocation('/usr/local/lib/node_modules/gpugate/dist/cli/main.js', { HOME: '/' })).toBeNull();
    expect(unstableLocation('/usr/bin/node', {})).toBeNull();
  });
});

describe('servicePathDirs', () => {
  it('is systemd\'s default search path unless GPUGATE_SERVICE_PATH says otherwise (relative entries dropped)', () => {
    expect(servicePathDirs({})).toEqual(SYSTEMD_SERVICE_PATH.split(':'));
    expect(servicePathDirs({ GPUGATE_SERVICE_PATH: '/opt/x/bin:bin::/usr/bin' })).toEqual(['/opt/x/bin', '/usr/bin']);
  });
});
