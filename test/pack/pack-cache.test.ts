/**
 * The prepared-package cache (scripts/prepared-package.cjs) under the OS temp directory is shared by
 * every clone on the host. Two clones with the same sources prepare the package at the same time into
 * one fresh temp directory; then the first is deleted; the repository itself must still get a usable
 * entry from that cache (the package loads its prebuild through node-gyp-build from the entry, as
 * test/pack/multi-node.test.ts does). A damaged entry (a node_modules link into a deleted clone, a missing
 * tarball) is reported as unusable. And `npm pack` in a clean clone with no working compiler refuses,
 * saying why, instead of making a tarball without the prebuild. Real clones (copies of the staged
 * files), real builds, real npm.
 */
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { entryProblem, repoRoot, stagedPaths, stagingKey } from '../../scripts/prepared-package.cjs';

const SCENARIO = join(repoRoot, 'scenarios', 'idle-8x-rtx-pro-6000.json');

/** A clone of the repository as far as packing goes: the staged files and the clone's own node_modules. */
function makeClone(dir: string): void {
  mkdirSync(dir, { recursive: true });
  for (const rel of [...stagedPaths(), 'scripts/prepared-package.cjs']) {
    mkdirSync(dirname(join(dir, rel)), { recursive: true });
    cpSync(join(repoRoot, rel), join(dir, rel), { recursive: true });
  }
  symlinkSync(join(repoRoot, 'node_modules'), join(dir, 'node_modules'), 'dir');
}

interface Prepared { dir: string; tarball: string }

/** Runs `node <root>/scripts/prepared-package.cjs` with the given temp directory. */
function prepareIn(root: string, cacheTmp: string): Promise<{ code: number | null; prepared: Prepared | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(root, 'scripts', 'prepared-package.cjs')], {
      cwd: root, env: { ...process.env, TMPDIR: cacheTmp }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString(); });
    child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString(); });
    child.on('close', (code) => {
      const json = /^\{[\s\S]*?\n\}/m.exec(stdout)?.[0];
      resolve({ code, prepared: json === undefined ? null : JSON.parse(json) as Prepared, output: `${stdout}\n${stderr}` });
    });
  });
}

/** Loads the addon from the entry's prebuild (never a local build) and snapshots the simulator. */
const PROBE = `
const path = require('node:path');
const pkg = process.argv[1];
const gpugate = require(path.join(pkg, 'dist', 'index.js'));
const resolved = require(require.resolve('node-gyp-build', { paths: [pkg] })).resolve(pkg);
(async () => {
  const session = await gpugate.openNvml({ libraryPath: gpugate.findSimLibrary({ packageRoot: pkg }) });
  const snap = await session.snapshot();
  await session.close();
  process.stdout.write(JSON.stringify({ resolved, devices: snap.devices.length }));
})().catch((err) => { console.error(err && err.stack || err); process.exit(1); });
`;

describe('the prepared-package cache shared by several clones', () => {
  let work: string;
  let cacheTmp: string;

  beforeAll(() => {
    work = mkdtempSync(join(tmpdir(), 'gpugate-pack-cache-'));
    cacheTmp = join(work, 'tmp');
    mkdirSync(cacheTmp);
  });

  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('two clones preparing at once share one entry, which still works from a third once the first clone is deleted', async () => {
    const cloneA = join(work, 'clone-a');
    const cloneB = join(work, 'clone-b');
    makeClone(cloneA);
    makeClone(cloneB);
    const [a, b] = await Promise.all([prepareIn(cloneA, cacheTmp), prepareIn(cloneB, cacheTmp)]);
    expect(a.code, a.output).toBe(0);
    expect(b.code, b.output).toBe(0);
    expect(a.prepared?.dir).toBeDefined();
    expect(b.prepared?.dir).toBe(a.prepared?.dir);
    const entry = a.prepared?.dir as string;
    expect(entry).toBe(join(cacheTmp, 'gpugate-prepared-package', stagingKey()));
    // Nothing of either build is left half-made.
    expect(readdirSync(join(cacheTmp, 'gpugate-prepared-package')).filter((n) => /\.(tmp|lock|trash)/.test(n))).toEqual([]);

    rmSync(cloneA, { recursive: true, force: true });
    expect(lstatSync(join(entry, 'node_modules')).isSymbolicLink()).toBe(false);
    expect(entryProblem(entry)).toBeNull();

    // The repository (a third clone with the same sources) reuses the entry as it is.
    const repo = await prepareIn(repoRoot, cacheTmp);
    expect(repo.code, repo.output).toBe(0);
    expect(repo.prepared?.dir).toBe(entry);
    expect(repo.output).not.toContain('discarding');
    const probe = spawnSync(process.execPath, ['-e', PROBE, entry], {
      encoding: 'utf8',
      env: { ...process.env, PREBUILDS_ONLY: '1', GPUGATE_SIM_SCENARIO: SCENARIO, GPUGATE_PREBUILD: '' },
      timeout: 60_000,
    });
    expect(probe.stderr).toBe('');
    expect(probe.status).toBe(0);
    expect(JSON.parse(probe.stdout)).toEqual({ resolved: join(entry, 'prebuilds', 'linux-x64', 'gpugate.glibc.node'), devices: 8 });
  }, 600_000);

  it('reports an entry whose node_modules links into a deleted clone, or that lost its tarball, as unusable', () => {
    const entry = join(cacheTmp, 'gpugate-prepared-package', stagingKey());
    if (!existsSync(entry)) throw new Error('the first test did not prepare an entry');
    const copy = join(work, 'damaged');
    cpSync(entry, copy, { recursive: true });
    expect(entryProblem(copy)).toBeNull();
    rmSync(join(copy, 'node_modules'), { recursive: true });
    symlinkSync(join(work, 'deleted-clone', 'node_modules'), join(copy, 'node_modules'), 'dir');
    expect(entryProblem(copy)).toContain('node_modules is a link');
    unlinkSync(join(copy, 'node_modules'));
    cpSync(join(entry, 'node_modules'), join(copy, 'node_modules'), { recursive: true });
    expect(entryProblem(copy)).toBeNull();
    const { filename } = JSON.parse(readFileSync(join(copy, 'pack.json'), 'utf8')) as { filename: string };
    rmSync(join(copy, filename));
    expect(entryProblem(copy)).toMatch(/^no gpugate-.*\.tgz$/);
  });
});

describe('npm pack in a clean clone without a working compiler', () => {
  it('refuses with a clear message and makes no tarball (prepack needs the prebuild)', () => {
    const work = mkdtempSync(join(tmpdir(), 'gpugate-prepack-'));
    try {
      const clone = join(work, 'clone');
      makeClone(clone);
      const r = spawnSync('npm', ['pack', '--pack-destination', clone], {
        cwd: clone,
        encoding: 'utf8',
        env: { ...process.env, CC: '/bin/false', CXX: '/bin/false', npm_config_ignore_scripts: 'false' },
        timeout: 300_000,
      });
      expect(r.status).not.toBe(0);
      expect(r.stderr).toContain('prebuild:linux: prebuildify failed');
      expect(r.stderr).toContain('no prebuilt addon, so no package is made');
      expect(r.stderr).toContain('needs a C++');
      expect(readdirSync(clone).filter((name) => name.endsWith('.tgz'))).toEqual([]);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }, 300_000);
});
