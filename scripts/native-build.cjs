#!/usr/bin/env node
// native-build.cjs: which native targets are built when, so that a fresh clone's `npm install`
// compiles only what the quick start (`npx gpugate demo`) needs.
//
//   node scripts/native-build.cjs install       the package's install script: nothing when an addon
//                                               loads (a package's prebuild, a build already there),
//                                               else the addon and the current driver's simulator
//   node scripts/native-build.cjs sim-profiles  the simulator's other driver profiles, when the
//                                               build lacks one (`npm run build:sim-profiles`; the
//                                               test suites' global setup runs it)
//
// `npm run build:native` (node-gyp rebuild) and `npm pack` (prebuildify) still build every target.

'use strict';

const { spawnSync } = require('node:child_process');
const { existsSync } = require('node:fs');
const { join, resolve } = require('node:path');

const packageRoot = resolve(__dirname, '..');

/**
 * The binding.gyp targets `gpugate demo` needs: the addon, the NVML helper process it runs NVML in,
 * and the simulator of the current driver. make builds the static libraries they link first
 * (gpugate_nvml_core, compiled once for the addon and the helper, and gpugate_sim_core).
 */
const QUICK_START_TARGETS = ['gpugate', 'gpugate-nvml-helper', 'gpugate_sim'];

/**
 * The binding.gyp target that builds every driver profile and installs each under the driver's file
 * name. Each profile compiles only sim/symbols.cc and links gpugate_sim_core, which a build of the
 * quick-start targets has already made.
 */
const SIM_PROFILES_TARGET = 'gpugate_sim_nvml_name';

/** node-gyp's command line: the package's own node-gyp, else the one npm runs install scripts with. */
function nodeGypCommand() {
  try {
    return [process.execPath, require.resolve('node-gyp/bin/node-gyp.js', { paths: [packageRoot] })];
  } catch {
    const bundled = process.env['npm_config_node_gyp'];
    return bundled ? [process.execPath, bundled] : ['node-gyp'];
  }
}

/** Runs node-gyp in `root` with `args`; throws naming the command when it fails. */
function runNodeGyp(root, args) {
  const [command, ...before] = nodeGypCommand();
  const run = spawnSync(command, [...before, ...args], { cwd: root, stdio: 'inherit' });
  if (run.error) throw new Error(`could not run node-gyp ${args.join(' ')} in ${root}: ${run.error.message}`);
  if (run.status !== 0) throw new Error(`node-gyp ${args.join(' ')} failed in ${root} (${run.status ?? run.signal})`);
}

/**
 * Whether node-gyp-build finds an addon in `root` that loads here (it tries the prebuilds and build/),
 * with the NVML helper it runs beside it (a build from before the helper existed is built again).
 */
function addonLoads(root) {
  const gypBuild = JSON.stringify(require.resolve('node-gyp-build', { paths: [root] }));
  const script =
    `const path = require('node:path'); const addon = require(${gypBuild}).resolve(${JSON.stringify(root)}); require(addon);` +
    `if (!require('node:fs').existsSync(path.join(path.dirname(addon), 'gpugate-nvml-helper'))) process.exit(1);`;
  return spawnSync(process.execPath, ['-e', script], { stdio: 'ignore' }).status === 0;
}

/** The install script (package.json `install`): builds the quick-start targets when no addon loads. */
function install(root = packageRoot) {
  const fromSource = process.env['npm_config_build_from_source'] === 'true';
  if (!fromSource && addonLoads(root)) return false;
  runNodeGyp(root, ['clean']);
  runNodeGyp(root, ['configure']);
  runNodeGyp(root, ['build', '--jobs', 'max', ...QUICK_START_TARGETS]);
  return true;
}

/** The driver profiles' files under build/Release (sim/<profile>/libnvidia-ml.so.1) that are not there. */
function missingSimProfiles(root = packageRoot) {
  const table = require(join(root, 'sim', 'profile-table.cjs'));
  return table.readProfileTable().profiles
    .flatMap((profile) => table.driverNamePaths(profile.token))
    .filter((file) => !existsSync(join(root, 'build', 'Release', file)));
}

/** Builds the driver profiles when one is missing (configuring first in a tree never configured); never the addon. */
function buildSimProfiles(root = packageRoot) {
  const missing = missingSimProfiles(root);
  if (missing.length === 0) return false;
  console.error(`native-build: building the simulator's driver profiles (missing: ${missing.join(', ')})`);
  if (!existsSync(join(root, 'build', 'Makefile'))) runNodeGyp(root, ['configure']);
  runNodeGyp(root, ['build', '--jobs', 'max', SIM_PROFILES_TARGET]);
  return true;
}

module.exports = { QUICK_START_TARGETS, SIM_PROFILES_TARGET, install, missingSimProfiles, buildSimProfiles };

if (require.main === module) {
  const [command, ...rest] = process.argv.slice(2);
  const commands = new Map([['install', install], ['sim-profiles', buildSimProfiles]]);
  const run = rest.length === 0 && command !== undefined ? commands.get(command) : undefined;
  if (run === undefined) {
    console.error('usage: node scripts/native-build.cjs install | sim-profiles');
    process.exit(64);
  }
  try {
    run();
  } catch (error) {
    console.error(`native-build: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(1);
  }
}
