#!/usr/bin/env node
// prebuild-linux.mjs (`npm run prebuild:linux`): builds prebuilds/linux-<arch>/ with prebuildify:
// the addon as one N-API binary (gpugate.glibc.node, stripped, built for the oldest Node that
// package.json's engines allows) and, next to it, the simulator libraries (gpugate_sim*.so, stripped)
// that prebuildify copies from build/Release, and the NVML helper executable (gpugate-nvml-helper,
// stripped; prebuildify copies only libraries, so this script does), which the addon runs from its
// own folder. node-gyp-build loads the prebuild when there is no
// local build; src/simulator/sim-library.ts finds the simulator there.
//
// Note: prebuildify runs `node-gyp rebuild`, which replaces build/ in the directory it builds.
//
// It is the package's `prepack` script: `npm pack` and `npm publish` build the prebuild first, so a
// tarball made from a clean clone always carries it (hosts without a compiler install from it). When
// the build fails (no C++ compiler, make or python3) it refuses, and no tarball is made.
//
// Usage: node scripts/prebuild-linux.mjs [--cwd DIR]   (DIR: a package directory, default the repo)

import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(join(repoRoot, 'package.json'));

function fail(message) {
  console.error(`prebuild:linux: ${message}`);
  process.exit(1);
}

function parseArgs(argv) {
  let cwd = repoRoot;
  for (let i = 0; i < argv.length; i += 1) {
    const a = argv[i];
    if (a === '--cwd') {
      const v = argv[i + 1];
      if (!v) fail('--cwd needs a directory');
      cwd = resolve(v);
      i += 1;
    } else {
      fail(`unknown argument "${a}" (expected: --cwd DIR)`);
    }
  }
  if (!existsSync(join(cwd, 'binding.gyp'))) fail(`${cwd} has no binding.gyp`);
  return { cwd };
}

/** The oldest Node major that engines.node allows (">=20" -> 20). */
function oldestSupportedMajor(pkg) {
  const m = /(\d+)/.exec(pkg.engines?.node ?? '');
  if (!m) fail('package.json has no engines.node range to take the oldest supported Node from');
  return Number(m[1]);
}

/** Node's headers next to the running node (a system install has them in <prefix>/include/node). */
function localNodeDir() {
  const prefix = resolve(dirname(process.execPath), '..');
  return existsSync(join(prefix, 'include', 'node', 'node_api.h')) ? prefix : null;
}

function main() {
  const { cwd } = parseArgs(process.argv.slice(2));
  const pkg = JSON.parse(readFileSync(join(cwd, 'package.json'), 'utf8'));
  const major = oldestSupportedMajor(pkg);
  const runningMajor = Number(process.versions.node.split('.')[0]);
  // N-API binaries are forward compatible: build against the oldest supported Node's headers.
  const target = runningMajor === major ? process.versions.node : `${major}.0.0`;

  const env = { ...process.env };
  env.PREBUILD_NODE_GYP = require.resolve('node-gyp/bin/node-gyp.js');
  // node-gyp compiles one file at a time unless told otherwise.
  if (!env.JOBS && !env.npm_config_jobs) env.JOBS = 'max';
  if (!env.npm_config_nodedir && runningMajor === major) {
    // Offline-friendly: use the headers of the running Node instead of downloading them.
    const nodedir = localNodeDir();
    if (nodedir) env.npm_config_nodedir = nodedir;
  }

  const prebuildDir = join(cwd, 'prebuilds', `${process.platform}-${process.arch}`);
  rmSync(prebuildDir, { recursive: true, force: true });

  const prebuildify = require.resolve('prebuildify/bin.js');
  console.error(`prebuild:linux: prebuildify --napi --strip --tag-libc --target ${target} in ${cwd}`);
  const r = spawnSync(process.execPath, [prebuildify, '--napi', '--strip', '--tag-libc', '--target', target],
    { cwd, env, stdio: 'inherit' });
  if (r.status !== 0) {
    fail(`prebuildify failed (${r.status ?? r.signal}): no prebuilt addon, so no package is made.\n` +
      'A gpugate package must carry prebuilds/ (GPU hosts often have no compiler); building it needs a C++\n' +
      'compiler, make and python3 (Debian: apt-get install g++ make python3). The compiler output is above.');
  }

  // The addon runs NVML in this executable, found beside the addon's own file (never on PATH).
  const helper = join(cwd, 'build', 'Release', 'gpugate-nvml-helper');
  if (!existsSync(helper)) fail(`no ${helper}: the build did not make the NVML helper`);
  const shippedHelper = join(prebuildDir, 'gpugate-nvml-helper');
  copyFileSync(helper, shippedHelper);
  const stripped = spawnSync('strip', ['--strip-all', shippedHelper], { stdio: 'inherit' });
  if (stripped.status !== 0) fail(`strip --strip-all ${shippedHelper} failed (${stripped.status ?? stripped.error?.message})`);
  chmodSync(shippedHelper, 0o755);

  const files = existsSync(prebuildDir) ? readdirSync(prebuildDir).sort() : [];
  if (!files.some((f) => f.endsWith('.node'))) fail(`no addon binary in ${prebuildDir}`);
  if (!files.includes('gpugate_sim.so')) fail(`no gpugate_sim.so in ${prebuildDir}`);
  if (!files.includes('gpugate-nvml-helper')) fail(`no gpugate-nvml-helper in ${prebuildDir}`);
  for (const f of files) {
    console.error(`prebuild:linux: ${join(prebuildDir, f)} (${statSync(join(prebuildDir, f)).size} bytes)`);
  }
}

main();
