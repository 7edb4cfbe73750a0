/**
 * The proof that a holder carrying an NVIDIA daemon's name is that daemon (src/gate/ignored-daemons.ts),
 * on prepared /proc entries: root and an executable of the daemon's name prove it; any doubt
 * (another uid, another executable, an owner or executable that cannot be read) does not. The
 * attack itself, with real renamed processes and the real command, is in
 * test/reliability/ignored-daemons.test.ts.
 */
import { symlinkSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { daemonNamed, proveDaemon } from '../../src/gate/ignored-daemons';
import { DEFAULT_IGNORED_NAMES } from '../../src/gate/criteria';
import { ProcRoot, makeStat } from '../helpers/proc-root';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

const ROOT_STATUS = 'Name:\tnv-hostengine\nUid:\t0\t0\t0\t0\n';

/** A prepared entry for pid 4242 named nv-hostengine; `exe` a link target, 'file' (not a link) or null (none). */
function entry(status: string | undefined, exe: string | 'file' | null): string {
  const root = new ProcRoot();
  cleanups.push(() => root.remove());
  root.add({ pid: 4242, stat: makeStat(4242, 'nv-hostengine', { 22: 777 }), comm: 'nv-hostengine\n', ...(status !== undefined ? { status } : {}) });
  const link = path.join(root.root, '4242', 'exe');
  if (exe === 'file') writeFileSync(link, '');
  else if (exe !== null) symlinkSync(exe, link);
  return root.root;
}

describe('daemonNamed', () => {
  it('matches a comm to a daemon as the kernel cuts the name (15 bytes)', () => {
    const daemons = new Set(DEFAULT_IGNORED_NAMES);
    expect(daemonNamed('nvidia-persiste', daemons)).toBe('nvidia-persistenced');
    expect(daemonNamed('nv-hostengine', daemons)).toBe('nv-hostengine');
    expect(daemonNamed('nvidia-persistenced', daemons)).toBeNull();
    expect(daemonNamed('python3', daemons)).toBeNull();
    expect(daemonNamed(null, daemons)).toBeNull();
  });
});

describe('proveDaemon', () => {
  it('root running an executable of the daemon\'s name is the daemon, also after its file was replaced', async () => {
    expect(await proveDaemon(4242, 'nv-hostengine', entry(ROOT_STATUS, '/usr/bin/nv-hostengine'))).toEqual({ genuine: true });
    expect(await proveDaemon(4242, 'nv-hostengine', entry(ROOT_STATUS, '/usr/bin/nv-hostengine (deleted)'))).toEqual({ genuine: true });
  });

  it('any doubt counts the process as a holder, saying why', async () => {
    const cases: Array<[string | undefined, string | 'file' | null, RegExp]> = [
      ['Uid:\t1000\t1000\t1000\t1000\n', '/usr/bin/nv-hostengine', /uid 1000, not root/],
      // A setuid-root program run by a user keeps the user as its real uid.
      ['Uid:\t1000\t0\t0\t0\n', '/usr/bin/nv-hostengine', /uid 1000, not root/],
      [ROOT_STATUS, '/usr/bin/python3.11', /its executable is \/usr\/bin\/python3\.11/],
      [ROOT_STATUS, '/opt/nv-hostengine-wrapper/run', /its executable is/],
      [ROOT_STATUS, 'file', /cannot read .*exe/],
      [ROOT_STATUS, null, /no executable/],
      ['Name:\tnv-hostengine\n', '/usr/bin/nv-hostengine', /owner cannot be read/],
      [undefined, '/usr/bin/nv-hostengine', /owner cannot be read/],
    ];
    for (const [status, exe, why] of cases) {
      const proof = await proveDaemon(4242, 'nv-hostengine', entry(status, exe));
      expect(proof, `${status ?? '(no status)'} ${exe ?? '(no exe)'}`).toEqual({ genuine: false, why: expect.stringMatching(why) });
    }
  });

  it('a pid with no entry is no daemon', async () => {
    expect(await proveDaemon(4243, 'nv-hostengine', entry(ROOT_STATUS, '/usr/bin/nv-hostengine'))).toEqual({ genuine: false, why: expect.stringMatching(/could not be read/) });
  });
});
