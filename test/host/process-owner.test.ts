/**
 * Who owns a process: real processes started as another uid (setpriv), read back through /proc
 * with a passwd file the test writes (a named uid, a uid only NSS would know), their start time
 * and age, their whole command line, and their unit from a real cgroup; plus the passwd parser
 * and the "missing" / "unreadable" values.
 */
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { parsePasswd, readProcessOwner, readUserNames, realUidOf } from '../../src/host/process-owner';
import { parseArgv, parseStatus, readBootTimeMs } from '../../src/host/procfs';
import { cgroupUnavailable, makeServiceCgroup } from '../helpers/cgroups';
import { isAlive, until } from '../helpers/processes';
import { makeTestTempDir } from '../helpers/temp-root';

const work = makeTestTempDir('gpugate-owner-');
const passwd = path.join(work, 'passwd');
writeFileSync(passwd, [
  '# a comment line',
  'root:x:0:0:root:/root:/bin/bash',
  'vllm:x:4242:4242:vLLM service:/var/lib/vllm:/usr/sbin/nologin',
  'shadowed:x:4242:4242:a second name for 4242:/:/bin/false',
  '+nisuser::::::',
  'broken line',
  '',
].join('\n'));
afterAll(() => spawnSync('rm', ['-rf', work]));

const pids: number[] = [];
const cleanups: Array<() => void> = [];
afterEach(async () => {
  for (const pid of pids.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
    await until(`pid ${pid} to exit`, () => !isAlive(pid)).catch(() => {});
  }
  for (const cleanup of cleanups.splice(0).reverse()) cleanup();
});

const setprivMissing = spawnSync('setpriv', ['--version'], { encoding: 'utf8' }).status === 0 ? null : 'setpriv (util-linux) is not installed';
const notRoot = process.getuid?.() === 0 ? null : 'needs root to start a process as another uid';
const cannotSwitch = setprivMissing ?? notRoot;

/** A `sleep 60` started as `uid` (and its gid) through setpriv, its argv[0] set to `title`. */
async function sleeperAs(uid: number, title: string): Promise<number> {
  const child = spawn('setpriv', [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', '--', 'bash', '-c', 'exec -a "$0" sleep 60', title], { stdio: 'ignore' });
  child.on('error', () => {});
  const pid = child.pid!;
  pids.push(pid);
  await until(`pid ${pid} to exec sleep as ${uid}`, () => {
    try {
      return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'sleep';
    } catch {
      return false;
    }
  });
  return pid;
}

describe('parsePasswd', () => {
  it('names uids by the first entry, skipping comments, NIS lines and malformed lines', () => {
    expect([...parsePasswd(readFileSync(passwd, 'utf8'))]).toEqual([[0, 'root'], [4242, 'vllm']]);
    expect(parsePasswd('')).toEqual(new Map());
    expect(parsePasswd('a:x:notanumber:0::/:/bin/sh\nb:x:-1:0::/:/bin/sh\n')).toEqual(new Map());
  });

  it('reads the real /etc/passwd: root is uid 0', async () => {
    const read = await readUserNames();
    expect(read.kind).toBe('ok');
    if (read.kind === 'ok') expect(read.names.get(0)).toBe('root');
  });

  it('a missing passwd file is a value, not an exception', async () => {
    expect(await readUserNames(path.join(work, 'no-such-passwd'))).toEqual({ kind: 'missing' });
  });
});

describe('parseArgv', () => {
  it('keeps each argument whole, an empty one in the middle too; trailing NULs (a padded process title) end it', () => {
    expect(parseArgv('python3\0-c\0\0x y\0')).toEqual(['python3', '-c', '', 'x y']);
    expect(parseArgv('VLLM::Worker_TP6\0\0\0\0')).toEqual(['VLLM::Worker_TP6']);
    expect(parseArgv('')).toEqual([]);
  });
});

describe('realUidOf', () => {
  it('takes the real uid, the first of the four', () => {
    expect(realUidOf(parseStatus('Name:\tx\nUid:\t1000\t0\t0\t0\nGid:\t1\t1\t1\t1\n'))).toBe(1000);
    expect(realUidOf(parseStatus('Name:\tx\n'))).toBeNull();
    expect(realUidOf(null)).toBeNull();
  });
});

describe.skipIf(cannotSwitch !== null)(`readProcessOwner on real processes${cannotSwitch === null ? '' : ` (skipped: ${cannotSwitch})`}`, () => {
  it('a process of uid 4242 is user vllm by the passwd file, with its start, age and whole command line', async () => {
    const before = Date.now();
    const pid = await sleeperAs(4242, 'VLLM::Worker_TP6 --tp 8');
    const after = Date.now();
    const atMs = after + 180_000;
    const read = await readProcessOwner(pid, { passwdPath: passwd, atMs });
    if (read.kind !== 'ok') throw new Error(`cannot read the owner: ${JSON.stringify(read)}`);
    const { owner } = read;
    expect(owner.uid).toBe(4242);
    expect(owner.user).toBe('vllm');
    // argv[0] with spaces stays one argument.
    expect(owner.argv).toEqual(['VLLM::Worker_TP6 --tp 8', '60']);
    // The start time comes from stat ticks and btime (one-second resolution).
    const boot = (await readBootTimeMs())!;
    expect(owner.startedAt).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000 - 1000);
    expect(owner.startedAt).toBeLessThanOrEqual(after + 1000);
    expect(owner.startedAt).toBeGreaterThan(boot);
    expect(owner.ageMs).toBe(atMs - owner.startedAt!);
  });

  it('a uid the passwd file does not name (an NSS-only user) keeps its uid without a name', async () => {
    const pid = await sleeperAs(31337, 'worker');
    const read = await readProcessOwner(pid, { passwdPath: passwd });
    expect(read).toMatchObject({ kind: 'ok', owner: { uid: 31337, user: null } });
    // An unreadable passwd file leaves every owner nameless too.
    const none = await readProcessOwner(pid, { passwdPath: path.join(work, 'absent') });
    expect(none).toMatchObject({ kind: 'ok', owner: { uid: 31337, user: null } });
  });

  const unavailable = cgroupUnavailable('named') === null ? null : cgroupUnavailable('unified');
  it.skipIf(unavailable !== null)('a process in a real service cgroup is of that unit', async () => {
    const hierarchy = cgroupUnavailable('named') === null ? 'named' : 'unified';
    const { unit } = makeServiceCgroup(hierarchy, 'gpugate-test-owner', cleanups);
    const pid = await sleeperAs(4242, 'VLLM::EngineCore');
    unit.join(pid);
    const read = await readProcessOwner(pid, { passwdPath: passwd });
    if (read.kind !== 'ok') throw new Error(`cannot read the owner: ${JSON.stringify(read)}`);
    expect(read.owner.location).toEqual({ unit: path.basename(unit.path), userManagerUid: null, container: null, pod: null });
  });
});

describe('readProcessOwner without a process', () => {
  it('answers "missing" for a pid that does not exist, "unreadable" for a malformed stat', async () => {
    const procRoot = makeTestTempDir('gpugate-owner-proc-');
    writeFileSync(path.join(procRoot, 'stat'), readFileSync('/proc/stat', 'utf8'));
    spawnSync('mkdir', [path.join(procRoot, '77')]);
    writeFileSync(path.join(procRoot, '77', 'stat'), 'not a stat line');
    expect(await readProcessOwner(76, { procRoot })).toEqual({ kind: 'missing' });
    expect(await readProcessOwner(77, { procRoot })).toMatchObject({ kind: 'unreadable', reason: expect.stringContaining('malformed') });
    spawnSync('rm', ['-rf', procRoot]);
  });
});
